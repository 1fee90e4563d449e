// GET / : a minimal chat page (F6), embedded so the binary needs no files and the page no
// network: streams /v1/chat/completions with fetch, has a stop button, a system prompt, a
// temperature field and shows tokens/s. When the server wants an API key (401) the page asks for
// it once and keeps it in sessionStorage (this tab only).
#include "server/routes.h"

namespace loom {
namespace {

constexpr const char* kChatPage = R"HTML(<!doctype html>
<html><head><meta charset="utf-8"><title>loom chat</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:system-ui,sans-serif;max-width:820px;margin:0 auto;padding:12px;background:#fafafa}
#log{white-space:pre-wrap;border:1px solid #ddd;background:#fff;min-height:300px;padding:8px;overflow:auto}
.u{color:#0550ae;margin-top:8px}.a{color:#111;margin-top:4px}.e{color:#b00}
textarea{width:100%;box-sizing:border-box}#bar{display:flex;gap:8px;align-items:center;margin:6px 0}
#stat{color:#666;font-size:90%}
</style></head><body>
<h3>loom <span id="model"></span></h3>
<details><summary>settings</summary>
system prompt<br><textarea id="sys" rows="2"></textarea>
temperature <input id="temp" type="number" step="0.1" value="0.7" min="0" max="2">
max tokens <input id="maxt" type="number" value="256" min="1">
</details>
<div id="log"></div>
<textarea id="in" rows="3" placeholder="Message (Enter to send, Shift+Enter for a new line)"></textarea>
<div id="bar"><button id="send">Send</button><button id="stop" disabled>Stop</button>
<button id="clear">Clear</button><span id="stat"></span></div>
<script>
const $=id=>document.getElementById(id);let history=[];let ctrl=null;
let key=sessionStorage.getItem('loom-api-key')||'';
async function api(path,init={}){
  for(;;){const headers=Object.assign({},init.headers||{},key?{Authorization:'Bearer '+key}:{});
    const r=await fetch(path,Object.assign({},init,{headers}));if(r.status!==401)return r;
    const k=prompt('This loom server needs an API key (kept for this tab only):');
    if(!k)return r;key=k.trim();sessionStorage.setItem('loom-api-key',key);}
}
api('/v1/models').then(r=>r.json()).then(j=>{$('model').textContent=j.data[0].id}).catch(()=>{});
function add(cls,text){const d=document.createElement('div');d.className=cls;d.textContent=text;$('log').appendChild(d);$('log').scrollTop=1e9;return d;}
async function send(){
  const text=$('in').value.trim();if(!text||ctrl)return;$('in').value='';
  history.push({role:'user',content:text});add('u','> '+text);const out=add('a','');
  const msgs=($('sys').value.trim()?[{role:'system',content:$('sys').value.trim()}]:[]).concat(history);
  ctrl=new AbortController();$('stop').disabled=false;$('send').disabled=true;
  const t0=performance.now();let t1=0,n=0,reply='';
  try{
    const r=await api('/v1/chat/completions',{method:'POST',signal:ctrl.signal,headers:{'Content-Type':'application/json'},
      body:JSON.stringify({messages:msgs,stream:true,temperature:+$('temp').value,max_tokens:+$('maxt').value,stream_options:{include_usage:true}})});
    if(!r.ok){const j=await r.json();throw new Error(j.error?j.error.message:r.statusText);}
    const rd=r.body.getReader();const dec=new TextDecoder();let buf='';
    for(;;){const {value,done}=await rd.read();if(done)break;buf+=dec.decode(value,{stream:true});
      let i;while((i=buf.indexOf('\n\n'))>=0){const ev=buf.slice(0,i);buf=buf.slice(i+2);
        if(!ev.startsWith('data: ')||ev==='data: [DONE]')continue;const j=JSON.parse(ev.slice(6));
        if(j.error)throw new Error(j.error.message);
        if(j.usage)n=j.usage.completion_tokens;
        for(const c of j.choices||[]){if(c.delta&&c.delta.content){if(!t1)t1=performance.now();n++;reply+=c.delta.content;out.textContent=reply;}}
        const dt=(performance.now()-(t1||t0))/1000;$('stat').textContent=(n?n+' tokens, ':'')+(t1&&dt>0&&n?(n/dt).toFixed(1)+' tok/s':'');}}
  }catch(e){if(e.name!=='AbortError')add('e','error: '+e.message);}
  history.push({role:'assistant',content:reply});ctrl=null;$('stop').disabled=true;$('send').disabled=false;
}
$('send').onclick=send;$('stop').onclick=()=>{if(ctrl)ctrl.abort();};
$('clear').onclick=()=>{history=[];$('log').textContent='';};
$('in').addEventListener('keydown',e=>{if(e.key==='Enter'&&!e.shiftKey){e.preventDefault();send();}});
</script></body></html>
)HTML";

}  // namespace

void RegisterChatPage(httplib::Server& server) {
  server.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kChatPage, "text/html; charset=utf-8");
  });
}

}  // namespace loom

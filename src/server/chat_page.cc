// GET / : the chat page, embedded so the binary needs no files and the page no network. The page
// itself (HTML, CSS and JS in one document) is chat_page.html.inc, a raw string literal: it
// streams /v1/chat/completions, keeps conversations in localStorage and renders the replies'
// markdown with its own escaping renderer. When the server wants an API key (401) it asks for it
// and keeps it in sessionStorage (this tab only). tests/node/chat_page.test.mjs drives it in
// Chromium.
#include "server/routes.h"

namespace loom {
namespace {

constexpr const char* kChatPage =
#include "server/chat_page.html.inc"
    ;

// The page loads nothing and calls only this server; the policy makes that a rule, so text that
// got past the renderer's escaping still could not fetch or send anything elsewhere, and no other
// site can frame the page (clickjacking). Inline script and style are the page itself.
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

}  // namespace

void RegisterChatPage(HttpRouter& server) {
  server.Get("/", [](const HttpRequest&, HttpResponse& res) {
    res.set_header("Content-Security-Policy", kContentSecurityPolicy);
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_content(kChatPage, "text/html; charset=utf-8");
  });
}

}  // namespace loom

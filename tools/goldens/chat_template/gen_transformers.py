#!/usr/bin/env python3
"""Renders every template listed in testdata/expected_hf_jinja.json (written by gen.mjs) with
Python jinja2 configured exactly as Hugging Face transformers configures it
(transformers/utils/chat_template_utils.py: _compile_jinja_template), and writes
src/tokenizer/chat_template/testdata/expected_transformers.json.

transformers is the reference for loom; @huggingface/jinja is a second oracle. Where the two
disagree, chat_template_test expects the transformers result and the case is listed in
testdata/oracle_disagreements.md (also written by this script).

Also renders the hand-written testdata/feature_cases.json into testdata/expected_features.json.

Usage: python3 gen_transformers.py [path/to/shared]   (needs jinja2 >= 3.1; run gen.mjs first)
"""
import datetime
import json
import os
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "../../.."))
SHARED = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "../shared"))
TESTDATA = os.path.join(REPO, "src/tokenizer/chat_template/testdata")


class AssistantTracker(Extension):
    """transformers' {% generation %} ... {% endgeneration %}: renders its body unchanged."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def compile_template(source, fixed_now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return fixed_now.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


def load_source(src):
    path = os.path.join(SHARED, src["path"])
    if src["kind"] == "file":
        with open(path, encoding="utf-8") as f:
            return f.read()
    if src["kind"] == "jsonl":
        with open(path, encoding="utf-8") as f:
            return json.loads(f.read().split("\n")[src["line"]])[src["key"]]
    with open(path, encoding="utf-8") as f:
        ct = json.load(f)["chat_template"]
    if isinstance(ct, str):
        return ct
    return next(e["template"] for e in ct if e["name"] == src["name"])


def main():
    with open(os.path.join(TESTDATA, "expected_hf_jinja.json"), encoding="utf-8") as f:
        hf = json.load(f)
    with open(os.path.join(TESTDATA, "conversations.json"), encoding="utf-8") as f:
        convs = json.load(f)["conversations"]
    fixed_now = datetime.datetime.fromtimestamp(hf["fixed_epoch_seconds"], datetime.timezone.utc)
    out_templates, disagreements = [], []
    num_ok = num_err = 0
    for t in hf["templates"]:
        results = {}
        try:
            tpl, parse_error = compile_template(load_source(t["source"]), fixed_now), None
        except Exception as e:  # noqa: BLE001 - any template error is recorded
            tpl, parse_error = None, f"{type(e).__name__}: {e}"
        for conv in convs:
            ctx = {"tools": None, "documents": None}
            ctx.update({k: v for k, v in conv.items() if k != "id"})
            ctx.update(bos_token=t["bos_token"], eos_token=t["eos_token"])
            try:
                if parse_error:
                    raise RuntimeError(parse_error)
                results[conv["id"]] = {"output": tpl.render(**ctx)}
                num_ok += 1
            except Exception as e:  # noqa: BLE001
                results[conv["id"]] = {"error": str(e), "error_type": type(e).__name__}
                num_err += 1
            mine, theirs = results[conv["id"]], t["results"][conv["id"]]
            if ("output" in mine) != ("output" in theirs) or mine.get("output") != theirs.get("output"):
                disagreements.append((t["id"], conv["id"], mine, theirs))
        out_templates.append({"id": t["id"], "results": results})
    doc = {
        "_generated_by": "tools/goldens/chat_template/gen_transformers.py (do not edit by hand)",
        "oracle": f"jinja2 {jinja2.__version__} configured as transformers' chat templates",
        "templates": out_templates,
    }
    with open(os.path.join(TESTDATA, "expected_transformers.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")

    def brief(r):
        if "output" in r:
            return "renders " + json.dumps(r["output"][:60], ensure_ascii=False) + "..."
        return "error: " + r["error"][:80].replace("|", "/")

    with open(os.path.join(TESTDATA, "oracle_disagreements.md"), "w", encoding="utf-8") as f:
        f.write("# transformers (jinja2) vs @huggingface/jinja disagreements\n\n"
                "Generated by tools/goldens/chat_template/gen_transformers.py. loom follows\n"
                "transformers (jinja2) in each of these cases.\n\n"
                "| template | conversation | transformers | @huggingface/jinja |\n|---|---|---|---|\n")
        for tid, cid, mine, theirs in disagreements:
            f.write(f"| {tid} | {cid} | {brief(mine)} | {brief(theirs)} |\n")
    print(f"{len(out_templates)} templates: {num_ok} rendered, {num_err} errors; "
          f"{len(disagreements)} disagreements with @huggingface/jinja")
    render_feature_cases(fixed_now)


def render_feature_cases(fixed_now):
    """testdata/feature_cases.json (hand-written templates + contexts) -> expected_features.json."""
    with open(os.path.join(TESTDATA, "feature_cases.json"), encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    results = []
    for case in cases:
        try:
            out = {"output": compile_template(case["template"], fixed_now).render(**case["context"])}
        except Exception as e:  # noqa: BLE001
            out = {"error": str(e), "error_type": type(e).__name__}
        results.append({"name": case["name"], **out})
    doc = {
        "_generated_by": "tools/goldens/chat_template/gen_transformers.py (do not edit by hand)",
        "oracle": f"jinja2 {jinja2.__version__} configured as transformers' chat templates",
        "results": results,
    }
    with open(os.path.join(TESTDATA, "expected_features.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{len(results)} feature cases: {sum('error' in r for r in results)} errors")


if __name__ == "__main__":
    main()

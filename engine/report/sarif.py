"""SARIF 2.1.0 (OASIS Static Analysis Results Interchange Format) from the report model.

`build_sarif(report, pack)` turns one run's report (engine/report/model.py) into a
SARIF log with one run:

* every diagnostic and every insertion is a result. Its `ruleId` is the pack rule
  that decided it (an insertion's `rule`, an attribute edit's rule) or else the
  diagnostic's code (`W18888`, `PASS_FAILED`); a pass failure that stopped the run
  is an `error` result of code `PASS_FAILED` and `executionSuccessful: false`.
* `tool.driver.rules` holds each rule once: its id, a short description (the
  first sentence of its `doc:`), the help (the whole doc, the quoted source and
  where it is), and its source location under `properties.loc`.
* a result's physical location is the rule's file and line (`region` spans the
  quoted item); its logical locations are the graph, node and anchor, kept once
  in `run.logicalLocations` (graph > node > anchor by `parentIndex`).
* an insertion's decision path (its `explanation` steps) is a `codeFlow`: one
  thread-flow location per step, located at the step's rule, its facts as `state`.
* the pack folder that ran is the uri base `PACKROOT` (`originalUriBaseIds`) and
  `run.properties.pack`; files in it are cited relative to it.

Note [sarif levels]: GE severities map to SARIF levels (error → error, warning →
warning, info → note); an inserted node is a `note` — the tool fixed a conflict,
it does not ask the user to. `min_severity` drops the results below it.

The log is plain JSON with a stable order and no timings: byte-identical runs.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import yaml

from engine import __version__
from engine.core.gcpause import no_gc
from engine.report.explain import is_rejected_step
from engine.report.jsontext import indented

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
INFO_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/sarif-v2.1.0.html"
SEVERITIES = ("info", "warning", "error")          # --min-severity, lowest first
LEVEL = {"info": "note", "warning": "warning", "error": "error"}
INSERTION_SEVERITY = "info"
PACK_BASE, SRC_BASE = "PACKROOT", "%SRCROOT%"
# The codes the engine itself reports (the pack's passes name their own: their doc describes them).
ENGINE_CODES = {
    "ATTR_SET": "a pass set an attribute on an existing node",
    "PASS_FAILED": "a pass failed on this graph",
}
_LOC = re.compile(r"(.+?):(\d+)(?::(\d+))?")


def severity_rank(severity: str) -> int:
    return SEVERITIES.index(severity) if severity in SEVERITIES else 0


def build_sarif(report: dict, pack, model=None, *, min_severity: str = "info", failure=None) -> dict:
    """The SARIF log of one run over `model` (for the graph nesting). `failure`: the
    PassFailure that stopped the run, if one did."""
    with no_gc():        # Note [report without the collector] in engine/report/model.py
        return _build_sarif(report, pack, model, min_severity, failure)


def _build_sarif(report: dict, pack, model, min_severity: str, failure) -> dict:
    log = _Log(report, pack, model)
    floor = severity_rank(min_severity)
    for d in report["diagnostics"]:
        if severity_rank(d["severity"]) >= floor:
            log.diagnostic(d)
    if failure is not None:
        log.diagnostic({"code": "PASS_FAILED", "severity": "error", "message": str(failure),
                        "pass": failure.pass_id, **({"node": failure.node} if failure.node else {})})
    if severity_rank(INSERTION_SEVERITY) >= floor:
        for rec in report["insertions"]:
            log.insertion(rec)
    return log.finish(failure is None)


def sarif_json(log: dict) -> bytes:
    """json.dumps(log, indent=1, ensure_ascii=False) and a newline, as UTF-8 (Note [indented JSON])."""
    return indented(log, 1)


class _Log:
    def __init__(self, report: dict, pack, model):
        self.report = report
        self.pack = pack
        self.pack_dir = Path(pack.path).resolve()
        self.cwd = Path.cwd().resolve()
        self.rules: dict[str, dict] = {}           # rule id → reportingDescriptor
        self.rule_index: dict[str, int] = {}
        self.artifacts: dict[tuple, int] = {}      # (uri, base) → index
        # Note [artifacts resolved once]: every result, step and cite names a file of a few (the
        # pack's, the input); resolving the name (a stat per path part) for each of them was
        # half of build_sarif at 100k nodes. The working directory and the files do not change
        # while one log is built, so a name resolves to the same place throughout.
        self.uris: dict[str, tuple] = {}           # file as cited → (uri, base)
        self.logical: dict[str, int] = {}          # fully qualified name → index
        self.logical_list: list[dict] = []
        self.results: list[dict] = []
        self.parents = {g.name: g.parent_graph.name for g in model.graph_order if g.parent_graph is not None} \
            if model is not None else {}
        self.root = model.root.name if model is not None else ""

    # ---- locations --------------------------------------------------------------
    def artifact(self, file: str) -> dict:
        """An artifactLocation: relative to the pack folder, else the working directory, else absolute."""
        key = self.artifact_uri(file)
        uri, base = key
        if key not in self.artifacts:
            self.artifacts[key] = len(self.artifacts)
        out = {"uri": uri, "index": self.artifacts[key]}
        if base:
            out["uriBaseId"] = base
        return out

    def physical(self, loc: str) -> dict | None:
        m = _LOC.fullmatch(loc or "")
        if m is None:
            return None
        region = {"startLine": int(m[2])}
        if m[3]:
            region["startColumn"] = int(m[3])
        text = self.report["rules"].get(loc, {}).get("text")
        if text and "mark" not in self.report["rules"][loc]:
            region["endLine"] = int(m[2]) + text.count("\n")
        return {"artifactLocation": self.artifact(m[1]), "region": region}

    def logical_ref(self, graph: str, node: str | None = None, anchor: str | None = None) -> dict:
        """A logicalLocation naming the graph, node or anchor (the run keeps each once)."""
        idx = self._graph(graph)
        if node:
            idx = self._add(f"{self._fq(graph)}/{node}", node, "node", idx)
        if anchor:
            idx = self._add(f"{self.logical_list[idx]['fullyQualifiedName']}:{anchor}", f"{node}:{anchor}", "anchor", idx)
        entry = self.logical_list[idx]
        return {"index": idx, "fullyQualifiedName": entry["fullyQualifiedName"]}

    def anchor_ref(self, graph: str, ref: str) -> dict:
        node, _, idx = ref.rpartition(":")
        return self.logical_ref(graph, node, idx) if node else self.logical_ref(graph, ref)

    def _fq(self, graph: str) -> str:
        """root/…/graph: the chain of graphs down to this one."""
        chain = [graph]
        while chain[-1] in self.parents and len(chain) < 256:
            chain.append(self.parents[chain[-1]])
        return "/".join(reversed(chain))

    def _graph(self, graph: str) -> int:
        fq = self._fq(graph)
        if fq in self.logical:
            return self.logical[fq]
        parent = None
        if "/" in fq:
            parent = self._graph(fq.rsplit("/", 2)[-2])
        return self._add(fq, graph, "graph", parent)

    def _add(self, fq: str, name: str, kind: str, parent: int | None) -> int:
        if fq not in self.logical:
            entry = {"name": name, "fullyQualifiedName": fq, "kind": kind}
            if parent is not None:
                entry["parentIndex"] = parent
            self.logical[fq] = len(self.logical_list)
            self.logical_list.append(entry)
        return self.logical[fq]

    # ---- rules ------------------------------------------------------------------
    def rule(self, rule_id: str, loc: str, doc: str = "", what: str = "") -> int:
        if rule_id not in self.rules:
            entry = self.report["rules"].get(loc or "", {})
            doc = doc or _doc_of(entry.get("text", ""))
            short = _first_sentence(doc) or what or rule_id
            help_text = "\n".join(x for x in (doc, f"defined at {loc}" if loc else "",
                                              entry.get("text", "")) if x)
            desc = {"id": rule_id, "shortDescription": {"text": short},
                    "fullDescription": {"text": doc or short},
                    "help": {"text": help_text or short}}
            if entry.get("text"):
                desc["help"]["markdown"] = "\n\n".join(x for x in (doc, f"`{loc}`" if loc else "",
                                                                   "```yaml\n" + entry["text"] + "\n```") if x)
            if loc:
                desc["properties"] = {"loc": loc}
            self.rules[rule_id] = desc
            self.rule_index[rule_id] = len(self.rule_index)
        return self.rule_index[rule_id]

    # ---- results ----------------------------------------------------------------
    def diagnostic(self, d: dict) -> None:
        code = d["code"]
        cites = d.get("cites") or []
        rule_id = d.get("rule") or code
        spec = self.pack.passes.get(d.get("pass", ""))
        loc = d.get("rule_loc") or (cites[0]["loc"] if cites else str(spec.loc) if spec else "")
        if rule_id == code:
            what = ENGINE_CODES.get(code) or (f"{code}, reported by pass {spec.id}: {spec.doc}" if spec else code)
            index = self.rule(code, "" if code in ENGINE_CODES or spec is None else str(spec.loc), what, what)
        else:
            index = self.rule(rule_id, loc)
        graph = d.get("graph") or self.root or "graph"
        logical = []
        if d.get("anchor"):
            logical.append(self.anchor_ref(graph, d["anchor"]))
        for node in ([d["node"]] if isinstance(d.get("node"), str) else []) + list(d.get("nodes") or []):
            logical.append(self.logical_ref(graph, node))
        if not logical:
            logical.append(self.logical_ref(graph))
        location = {"logicalLocations": logical}
        phys = self.physical(loc) if loc else None
        if phys:
            location["physicalLocation"] = phys
        result = {"ruleId": rule_id, "ruleIndex": index, "level": LEVEL.get(d["severity"], "note"),
                  "message": {"text": d["message"]}, "locations": [location]}
        related = [self._related(k, c["loc"], f"{c['rule']} (cited)") for k, c in enumerate(cites)
                   if c["loc"] != loc]
        related = [r for r in related if r]
        if related:
            result["relatedLocations"] = related
        props = {k: v for k, v in d.items() if k not in ("message", "cites", "severity")}
        result["properties"] = props
        self.results.append(result)

    def insertion(self, rec: dict) -> None:
        index = self.rule(rec["rule"], rec.get("rule_loc") or "")
        graph = rec["graph"]
        where = f"{rec['producer'] or '(no producer)'} → {', '.join(rec['consumers']) or '(no consumer)'}"
        # the decision path; the alternatives GE rejected are no step of it (a property below)
        steps = [s for s in rec.get("explanation") or [] if not is_rejected_step(rec, s)]
        why = steps[0]["text"] if steps else ""
        text = f"{rec['type']} '{rec['name']}' inserted by pass {rec['pass']} in graph {graph} ({where})" + \
            (f": {why}" if why else "")
        location = {"logicalLocations": [self.logical_ref(graph, rec["name"])]}
        phys = self.physical(rec.get("rule_loc") or "")
        if phys:
            location["physicalLocation"] = phys
        result = {"ruleId": rec["rule"], "ruleIndex": index, "level": LEVEL[INSERTION_SEVERITY],
                  "message": {"text": text}, "locations": [location]}
        related = []
        for role, refs in (("producer", [rec["producer"]] if rec["producer"] else []),
                           ("consumer", rec["consumers"])):
            for ref in refs:
                for one in ref.split(", "):
                    related.append({"id": len(related), "message": {"text": f"{role} {one}"},
                                    "logicalLocations": [self.anchor_ref(graph, one)]})
        if related:
            result["relatedLocations"] = related
        if steps:
            result["codeFlows"] = [{"message": {"text": "decision path"},
                                    "threadFlows": [{"locations": [self._step(s, k) for k, s in enumerate(steps)]}]}]
        key = "\x1f".join([graph, rec["type"], rec["producer"], *rec["consumers"]])
        result["partialFingerprints"] = {"memconflictPosition/v1": hashlib.sha256(key.encode()).hexdigest()[:32]}
        props = {"pass": rec["pass"], "type": rec["type"], "graph": graph, "node": rec["name"],
                 "reason": rec.get("reason") or {}}
        for key in ("matrix_rule", "removed_by", "status", "alternatives"):
            if key in rec:
                props[key] = rec[key]
        result["properties"] = props
        self.results.append(result)

    def _step(self, s: dict, k: int) -> dict:
        location: dict = {"message": {"text": s["text"]}}
        phys = self.physical(s.get("loc") or "")
        if phys:
            location["physicalLocation"] = phys
        out = {"location": location, "executionOrder": k + 1}
        if s.get("facts"):
            state: dict = {}
            for label, value in s["facts"]:
                state.setdefault(str(label), {"text": str(value)})
            out["state"] = state
        if s.get("rule"):
            out["properties"] = {"rule": s["rule"]}
        return out

    def _related(self, k: int, loc: str, text: str) -> dict | None:
        phys = self.physical(loc)
        return {"id": k, "message": {"text": text}, "physicalLocation": phys} if phys else None

    # ---- the log ------------------------------------------------------------------
    def finish(self, ok: bool) -> dict:
        r = self.report
        self.artifact(r["input"])          # the analysed graph is an artifact too
        artifacts = [None] * len(self.artifacts)
        for (uri, base), idx in self.artifacts.items():
            loc = {"uri": uri, **({"uriBaseId": base} if base else {})}
            roles = ["analysisTarget"] if self._is_input(uri, base) else ["resultFile"]
            artifacts[idx] = {"location": loc, "roles": roles}
        pack_uri = _relative(self.pack_dir, self.cwd, SRC_BASE)
        bases = {SRC_BASE: {"uri": _dir_uri(self.cwd.as_uri()), "description": {"text": "the working directory"}}}
        packroot = {"uri": _dir_uri(pack_uri[0]), "uriBaseId": SRC_BASE} if pack_uri else \
            {"uri": _dir_uri(self.pack_dir.as_uri())}
        packroot["description"] = {"text": f"the rule pack folder that ran ({r['pack']['name']} {r['pack']['version']})"}
        bases[PACK_BASE] = packroot
        run = {
            "tool": {"driver": {"name": "memconflict", "version": __version__, "semanticVersion": __version__,
                                "informationUri": INFO_URI, "rules": list(self.rules.values())}},
            "invocations": [{"executionSuccessful": ok}],
            "originalUriBaseIds": bases,
            "artifacts": artifacts,
            "logicalLocations": self.logical_list,
            "results": self.results,
            "columnKind": "unicodeCodePoints",
            "properties": {"input": r["input"], "pack": r["pack"], "options": r["options"],
                           "passes": [p["id"] for p in r["passes"]]},
        }
        return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}

    def _is_input(self, uri: str, base: str | None) -> bool:
        return self.artifact_uri(self.report["input"]) == (uri, base)

    def artifact_uri(self, file: str) -> tuple:
        """(uri, uri base) of a file, resolved once a log (Note [artifacts resolved once])."""
        key = self.uris.get(file)
        if key is None:
            full = (Path(file) if Path(file).is_absolute() else self.cwd / file).resolve()
            key = self.uris[file] = _relative(full, self.pack_dir, PACK_BASE) or _relative(full, self.cwd, SRC_BASE) \
                or (full.as_uri(), None)
        return key


def _relative(full: Path, base: Path, base_id: str) -> tuple[str, str] | None:
    try:
        rel = full.relative_to(base)
    except ValueError:
        return None
    return rel.as_posix() or ".", base_id


def _dir_uri(uri: str) -> str:
    return uri if uri.endswith("/") else uri + "/"


def _doc_of(text: str) -> str:
    """The `doc:` of a quoted pack item (a list item, a `name: {doc, ...}` entry), if it has one."""
    if "doc" not in text:
        return ""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return ""
    if isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, dict) and len(value) == 1 and isinstance(next(iter(value.values())), dict) \
            and "doc" not in value:
        value = next(iter(value.values()))
    doc = value.get("doc") if isinstance(value, dict) else None
    return doc.strip() if isinstance(doc, str) else ""


def _first_sentence(doc: str) -> str:
    line = doc.strip().split("\n")[0]
    m = re.match(r"(.+?[.;])(\s|$)", line)
    return (m[1] if m else line).rstrip(".;")


# ---- `rules audit`: the op registry against GE's op IR --------------------------------------
AUDIT_RULES = {
    "unknown-op": "An op the pack names that GE's op IR does not define",
    "ref-not-written": "GE's IR writes an input in place (an output named like it), the pack's signature does not",
    "written-not-ref": "The pack's signature writes an input that GE's IR does not write",
    "port-count": "The pack's signature has another number of inputs or outputs than GE's IR",
    "port-name": "A port of the pack's signature differs from GE's IR by name or kind",
    "collective": "A collective of GE's IR registered with another engine than the pack's collective engine (or the reverse)",
    "unused-exception": "An accepted exception of op_ir_audit that matches no finding",
}


def build_audit_sarif(a) -> dict:
    """The SARIF log of `rules audit` (engine/passes/opaudit.py): a result per finding, located
    on the pack side with the IR definition as a related location; an accepted exception is a
    result with an in-source suppression citing its reason and where it is written."""
    cwd = Path.cwd().resolve()
    pack_dir = Path(a.pack.path).resolve()
    artifacts: dict[tuple, int] = {}

    def artifact(file: str) -> dict:
        full = (Path(file) if Path(file).is_absolute() else cwd / file).resolve()
        uri, base = _relative(full, pack_dir, PACK_BASE) or _relative(full, cwd, SRC_BASE) or (full.as_uri(), None)
        idx = artifacts.setdefault((uri, base), len(artifacts))
        return {"uri": uri, "index": idx, **({"uriBaseId": base} if base else {})}

    def physical(loc) -> dict:
        region = {"startLine": max(loc.line, 1)}
        if loc.col > 0:
            region["startColumn"] = loc.col
        return {"artifactLocation": artifact(loc.file), "region": region}

    rules = [{"id": check, "shortDescription": {"text": text}, "fullDescription": {"text": text},
              "help": {"text": text + ". Fix the pack's op registry (ops.yaml) or accept it under op_ir_audit.exceptions "
                       "with its reason (audit.yaml)."}} for check, text in AUDIT_RULES.items()]
    index = {r["id"]: k for k, r in enumerate(rules)}
    results = []
    for f, excepted in [(f, False) for f in a.findings] + [(f, True) for f in a.excepted]:
        result = {"ruleId": f.check, "ruleIndex": index[f.check], "level": "warning",
                  "message": {"text": f.message},
                  "locations": [{"physicalLocation": physical(f.loc),
                                 "logicalLocations": [{"name": f.op, "fullyQualifiedName": f.op, "kind": "type"}]}]}
        if f.ir_loc is not None:
            result["relatedLocations"] = [{"id": 0, "message": {"text": f"{f.op} in GE's op IR"},
                                           "physicalLocation": physical(f.ir_loc)}]
        if excepted:
            sup = {"kind": "inSource", "status": "accepted", "justification": f.reason}
            if f.excepted_at is not None:
                sup["location"] = {"physicalLocation": physical(f.excepted_at)}
            result["suppressions"] = [sup]
        results.append(result)
    artifact_list = [None] * len(artifacts)
    for (uri, base), idx in artifacts.items():
        artifact_list[idx] = {"location": {"uri": uri, **({"uriBaseId": base} if base else {})}}
    pack_uri = _relative(pack_dir, cwd, SRC_BASE)
    bases = {SRC_BASE: {"uri": _dir_uri(cwd.as_uri()), "description": {"text": "the working directory"}},
             PACK_BASE: ({"uri": _dir_uri(pack_uri[0]), "uriBaseId": SRC_BASE} if pack_uri else
                         {"uri": _dir_uri(pack_dir.as_uri())})}
    bases[PACK_BASE]["description"] = {"text": f"the rule pack folder audited ({a.pack.name} {a.pack.version})"}
    run = {"tool": {"driver": {"name": "memconflict", "version": __version__, "semanticVersion": __version__,
                               "informationUri": INFO_URI, "rules": rules}},
           "automationDetails": {"id": "memconflict/rules-audit/"},
           "invocations": [{"executionSuccessful": True}],
           "originalUriBaseIds": bases, "artifacts": artifact_list, "results": results,
           "columnKind": "unicodeCodePoints",
           "properties": {"ir": {"source": a.ir.source, "ops": len(a.ir.ops)},
                          "counts": {"findings": len(a.findings), "excepted": len(a.excepted)}}}
    return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}

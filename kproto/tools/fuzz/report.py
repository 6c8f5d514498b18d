"""The run's report: JSON, a readable text summary, and one self-contained HTML page.

Owns turning a finished :class:`~kproto.tools.fuzz.runner.Fuzzer` into data (findings by API and
oracle, requests per API/version, strategies used, coverage of fields and strategies, the
rate of distinct findings per minute, whether the broker still answers) and rendering it.
"""

from __future__ import annotations

import html
import json
from collections import Counter, defaultdict
from typing import Any, Optional

from kproto.tools.fuzz import mutators, schema, sequences
from kproto.tools.fuzz.corpus import version_ranges
from kproto.tools.fuzz.sequence_runs import REPLAY


def field_coverage(fuzzer: Any) -> dict[str, Any]:
    """Fields given a non-default value at least once, per API, out of the fields of the
    versions fuzzed."""
    touched: dict[str, set[str]] = defaultdict(set)
    kinds: Counter[str] = Counter()
    for (api, path, kind), n in fuzzer.gen.coverage.items():
        if kind != "tag_absent":
            touched[api].add(path)
        kinds[kind] += n
    per_api = {}
    for spec, versions in fuzzer.plan:
        total: set[str] = set()

        def walk(class_name: str, seen: set[str]) -> None:
            if class_name in seen:
                return
            seen.add(class_name)
            for f in schema.fields_of(class_name):
                if any(f.present(v) for v in versions):
                    total.add("{}.{}".format(class_name, f.attr))
                    if f.struct is not None:
                        walk(f.struct, seen)
        walk(spec.root, set())
        hit = touched.get(spec.api_name, set()) & total
        per_api[spec.api_name] = {"fields": len(total), "covered": len(hit)}
    all_fields = sum(v["fields"] for v in per_api.values())
    covered = sum(v["covered"] for v in per_api.values())
    return {"fields": all_fields, "covered": covered, "per_api": per_api,
            "value_kinds": dict(kinds)}


def build(fuzzer: Any) -> dict[str, Any]:
    stats = fuzzer.stats
    elapsed = max(stats.ended - stats.started, 1e-9)
    # the rate of the fuzzing loop: set-up (seed topic, coordinators) is not fuzzing
    loop = max(stats.ended - (stats.loop_started or stats.started), 1e-9)
    findings = sorted(fuzzer.findings.values(), key=lambda f: (f.api, f.oracle, f.signature))
    by_api_oracle: dict[str, Counter[str]] = defaultdict(Counter)
    for f in findings:
        by_api_oracle[f.api][f.oracle] += 1
    sent = sum(stats.requests.values())
    all_strategies = sorted(mutators.STRATEGIES) + sorted(sequences.SEQUENCES) + [
        "valid"] + ([REPLAY] if stats.strategies.get(REPLAY) else [])
    return {
        "target": fuzzer.config.bootstrap,
        "seed": fuzzer.config.seed,
        "seconds": round(elapsed, 3),
        "stop_reason": stats.stop_reason,
        "requests": sent,
        "requests_per_second": round(sent / loop, 1),
        "setup_seconds": round((stats.loop_started or stats.started) - stats.started, 3),
        "connections": fuzzer.target.connections_opened,
        "broker_alive_at_end": fuzzer.alive,
        "restarts": fuzzer.restarts,
        "deaths": list(fuzzer.deaths),
        "distinct_findings": len(findings),
        "findings_per_minute": round(len(findings) / (elapsed / 60.0), 2),
        "findings_by_api_oracle": {api: dict(c) for api, c in sorted(by_api_oracle.items())},
        "findings": [f.to_json() for f in findings],
        "requests_by_api_version": {"{} v{}".format(api, v): n for (api, v), n in
                                    sorted(stats.requests.items())},
        "outcomes": dict(stats.outcomes),
        "strategies": {name: stats.strategies.get(name, 0) for name in all_strategies},
        "strategy_coverage": {"used": sum(1 for n in all_strategies if stats.strategies.get(n)),
                              "total": len(all_strategies)},
        "field_coverage": field_coverage(fuzzer),
        "broker_api_versions": {str(k): list(v) for k, v in
                                sorted(fuzzer.target.api_versions.items())},
        "plan": {spec.api_name: [versions[0], versions[-1]] for spec, versions in fuzzer.plan},
        "coverage": broker_coverage(fuzzer),
        "answer_dictionary": {"answers": fuzzer.dictionary.harvested,
                              "names": len(fuzzer.dictionary.values),
                              "contexts": len(fuzzer.dictionary.contexts)},
    }


def broker_coverage(fuzzer: Any) -> Optional[dict[str, Any]]:
    """The broker's code coverage (--coverage): probes covered of the probes of the
    classes it ran, per Java package, over time, and the seeds it gave."""
    fb = fuzzer.feedback
    if fb is None:
        return None
    cmap = fb.map
    return {"covered": cmap.covered, "probes": cmap.probes,
            "request_handling": cmap.request_handling(),
            "per_package": {k: list(v) for k, v in cmap.per_package().items()},
            "timeline": [list(t) for t in fb.timeline], "feedback": fb.enabled,
            "seeds": fb.seed_count(), "seeded_requests": sum(fb.seeded_from.values()),
            "sequence_seeds": fb.sequence_seed_count(),
            "replayed_sequences": sum(fb.replayed.values()),
            "arms": fb.top_arms(), "reads": fb.reads,
            "read_seconds": round(fb.read_seconds, 1), "errors": fb.errors}


def _top_packages(cov: dict[str, Any], n: int = 15) -> list[tuple[str, int, int]]:
    rows = sorted(((k, v[0], v[1]) for k, v in cov["per_package"].items()),
                  key=lambda r: -r[1])
    return rows[:n]


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=1, sort_keys=True) + "\n"


def to_text(report: dict[str, Any]) -> str:
    lines = ["kproto fuzz report: {} (seed {})".format(report["target"], report["seed"]),
             "  {requests} requests in {seconds:.1f} s ({requests_per_second}/s after "
             "{setup_seconds:.1f} s of set-up), {connections} connections, stopped by "
             "{stop_reason}".format(**report),
             "  broker {} at the end; {} deaths, {} restarts".format(
                 "answers" if report["broker_alive_at_end"] else "DOES NOT answer",
                 len(report["deaths"]), report["restarts"]),
             "  {} distinct findings ({} per minute)".format(report["distinct_findings"],
                                                            report["findings_per_minute"])]
    if report["findings"]:
        lines.append("findings by API and oracle:")
        for api, oracles in report["findings_by_api_oracle"].items():
            lines.append("  {:32s} {}".format(api, ", ".join(
                "{} {}".format(o, n) for o, n in sorted(oracles.items()))))
        lines.append("findings:")
        for f in report["findings"]:
            lines.append("  [{oracle}] {api} {vs} via {strategy} (x{count}): {message}"
                         .format(**{**f, "message": f["message"][:140],
                                    "vs": version_ranges(f["versions"])}))
            if f.get("file"):
                lines.append("      reproducer: {}".format(f["file"]))
    cov = report["field_coverage"]
    sc = report["strategy_coverage"]
    lines.append("coverage: {} of {} fields given values; {} of {} strategies used".format(
        cov["covered"], cov["fields"], sc["used"], sc["total"]))
    bc = report.get("coverage")
    if bc:
        lines.append("broker coverage: {} of {} probes of the classes run ({} in request "
                     "handling); {} seeds, {} sequence seeds ({} replays){}".format(
                         bc["covered"], bc["probes"], bc["request_handling"], bc["seeds"],
                         bc.get("sequence_seeds", 0), bc.get("replayed_sequences", 0),
                         "" if bc["feedback"] else " (feedback off)"))
        for name, covered, probes in _top_packages(bc):
            lines.append("  {:52s} {:7d} of {:7d}".format(name, covered, probes))
        lines.append("  new request-handling probes credited to (API level, or sequence; "
                     "{} reads, {} s):".format(bc["reads"], bc["read_seconds"]))
        for row in bc["arms"][:10]:
            lines.append("    {:48s} {:8.1f} in {:5d} tries".format(row["arm"], row["credit"],
                                                                    row["tries"]))
    lines.append("strategies: " + ", ".join("{} {}".format(k, v)
                                              for k, v in report["strategies"].items() if v))
    lines.append("requests by API/version: " + ", ".join(
        "{} {}".format(k, v) for k, v in report["requests_by_api_version"].items()))
    return "\n".join(lines) + "\n"


def _table(rows: list[list[Any]], head: list[str]) -> str:
    out = ["<table><tr>" + "".join("<th>{}</th>".format(html.escape(h)) for h in head) + "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join("<td>{}</td>".format(html.escape(str(c))) for c in row)
                   + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _coverage_html(bc: Optional[dict[str, Any]]) -> str:
    if not bc:
        return ""
    return ("<h2>Broker code coverage</h2><p>{} of {} probes of the classes run ({} in "
            "request handling); {} seeds</p>".format(bc["covered"], bc["probes"],
                                                     bc["request_handling"], bc["seeds"])
            + _table([[k, v[0], v[1]] for k, v in bc["per_package"].items()],
                     ["package", "probes covered", "probes"])
            + "<h3>New request-handling probes credited to</h3>"
            + _table([[r["arm"], r["kind"], r["tries"], r["credit"]] for r in bc["arms"]],
                     ["API level or sequence", "kind", "tries", "credit"]))


def to_html(report: dict[str, Any]) -> str:
    """One page, no external resources: summary, findings (with bytes), tables."""
    findings = []
    for f in report["findings"]:
        findings.append(
            "<details><summary><b>[{}]</b> {} {} via {} (x{}) &mdash; {}</summary>"
            "<pre>{}</pre></details>".format(
                html.escape(f["oracle"]), html.escape(f["api"]), version_ranges(f["versions"]),
                html.escape(f["strategy"]), f["count"], html.escape(f["message"][:200]),
                html.escape(json.dumps({k: f[k] for k in ("header", "wire", "request", "note",
                                                          "minimised", "steps", "file")},
                                       indent=1))))
    cov = report["field_coverage"]
    body = [
        "<h1>kproto fuzz report</h1>",
        "<p>{} &middot; seed {} &middot; {} requests in {:.1f} s ({}/s) &middot; {} "
        "connections &middot; stopped by {} &middot; broker {} at the end</p>".format(
            html.escape(report["target"]), report["seed"], report["requests"],
            report["seconds"], report["requests_per_second"], report["connections"],
            html.escape(report["stop_reason"]),
            "answers" if report["broker_alive_at_end"] else "<b>does not answer</b>"),
        "<h2>{} distinct findings ({} per minute)</h2>".format(
            report["distinct_findings"], report["findings_per_minute"]),
        _table([[api, ", ".join("{} {}".format(o, n) for o, n in sorted(c.items()))]
                for api, c in report["findings_by_api_oracle"].items()], ["API", "oracles"]),
        "\n".join(findings),
        "<h2>Coverage</h2><p>{} of {} fields given values; {} of {} strategies used</p>".format(
            cov["covered"], cov["fields"], report["strategy_coverage"]["used"],
            report["strategy_coverage"]["total"]),
        _table([[k, v] for k, v in report["strategies"].items()], ["strategy", "sent"]),
        _table([[k, v["covered"], v["fields"]] for k, v in cov["per_api"].items()],
               ["API", "fields covered", "fields"]),
        _coverage_html(report.get("coverage")),
        "<h2>Requests by API and version</h2>",
        _table([[k, v] for k, v in report["requests_by_api_version"].items()],
               ["API version", "requests"]),
    ]
    style = ("body{font-family:sans-serif;max-width:70em;margin:2em auto}"
             "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;"
             "padding:2px 8px;text-align:left}pre{background:#f4f4f4;padding:8px;"
             "overflow-x:auto}")
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>kproto fuzz report"
            "</title><style>{}</style></head><body>\n{}\n</body></html>\n".format(
                style, "\n".join(body)))


__all__ = ["build", "to_json", "to_text", "to_html", "field_coverage"]

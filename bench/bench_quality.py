"""Summary quality on real failures: the labelled corpus through the bridge's own summarizer.

The corpus (bench/quality/corpus.json) holds real job failures, each error
text copied from a public issue thread (`source`), labelled with the runbooks
that fit and 1-3 facts a correct summary states (`a|b` = either). For each
configuration it prints one row:

- openclaw: share of alerts with an `openclaw` summary (repaired or not)
- repaired: share of alerts whose openclaw summary needed a repair
- runbook: share of alerts whose runbook hint is one of the labelled ones
- facts: share of labelled facts stated (title, likely cause, steps)
- invented: summaries naming a host, URL, version or number the dead letter does not hold
- seconds: per summary, median and max
- tokens: per summary, median prompt / completion tokens of the gateway call (the reply's `usage`,
  else characters / 4: `dlq_bridge_summary_tokens_total`); 0 for the fallback

    scripts/install-model && MODEL=qwen05 scripts/install-model && scripts/install-gateway
    python bench/bench_quality.py --config fallback direct:qwen15 direct:qwen05 gateway:qwen15

Runs one dead letter at a time (concurrency 1); the machine's load is printed.
`--limit N` takes the first N entries; `--out FILE` writes every summary as JSON.

`--shared-only` keeps the failures whose cause is shared (the error says its
dependency is unreachable, unavailable or rate-limited); those are summarized
from the cause alone (`openclaw.summary_per_cause`). `--per-cause off` shows the
model the whole dead letter instead, so the two can be compared in one run:

    python bench/bench_quality.py --corpus both --shared-only --config direct:qwen15 --per-cause on off

`--corpus heldout` runs bench/quality/heldout.json instead: real failures in the
same format that were labelled without looking at the fallback's runbook
patterns, which were written while reading corpus.json (its fallback figure is
a training figure; heldout's is the held-out one). `--corpus PATH` takes any
file in that format. Never tune runbook patterns on heldout.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bridge.core.health import Health
from bridge.core.metrics import Metrics
from bridge.core.models import DeadLetter, Summary
from bridge.intake.cause import cause_of
from bridge.intake.chain import normalize
from bridge.settings import Settings
from bridge.summarize.factory import build_summarizer
from bridge.summarize.runbooks import RunbookCatalog
from tests.support.model_server import ModelServer, find_model, start_model_server
from tests.support.openclaw_gateway import find_gateway, start_gateway
from tests.support.redis_server import start_private_redis

CORPORA = {name: Path(__file__).resolve().parent / "quality" / f"{name}.json"
           for name in ("corpus", "heldout", "heldout2", "heldout3")}
CORPUS = CORPORA["corpus"]
TOKEN = "bench-quality-token"
_CLAIMS = re.compile(
    r"(?i)\b[a-z][a-z0-9+.-]*://\S+"  # URLs
    r"|\b(?:[a-z0-9-]+\.)+[a-z]{2,}\b"  # host names
    r"|\bv?\d+(?:\.\d+)+\b"  # versions, addresses
    r"|\b\d{2,}\b"  # numbers of two digits or more
)


def corpus_paths(name: str) -> list[Path]:
    """`corpus` (default), `heldout`, `heldout2`, `heldout3`, `heldout-all` (the held-out files), `both`
    (corpus and heldout, in that order), or a path to a file in the same format."""
    if name == "both":
        return [CORPORA["corpus"], CORPORA["heldout"]]
    if name == "heldout-all":
        return [CORPORA["heldout"], CORPORA["heldout2"], CORPORA["heldout3"]]
    return [CORPORA.get(name) or Path(name)]


def load_corpus(limit: int | None = None, every: int = 1, path: Path = CORPUS) -> list[dict[str, Any]]:
    return load_corpora([path], limit, every)


def load_corpora(paths: list[Path], limit: int | None = None, every: int = 1) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    for path in paths:
        entries += json.loads(path.read_text(encoding="utf-8"))
    entries = entries[::every]
    return entries[:limit] if limit else entries


def dead_letter(entry: dict[str, Any]) -> DeadLetter:
    raw = {"queue": entry["queue"], "job_id": f"{entry['id']}-1", "job_name": entry["job_name"],
           "attempts": entry["attempts"], "last_error": entry["last_error"],
           "first_failed_at": "2026-11-30T00:00:00+00:00", "payload_excerpt": None}
    return normalize(json.dumps(raw).encode(), f"dead_letter:{entry['queue']}")


def summary_text(summary: Summary) -> str:
    return " ".join([summary.title, summary.likely_cause, *summary.next_steps])


def facts_stated(summary: Summary, facts: list[str]) -> int:
    text = summary_text(summary).lower()
    return sum(any(alt.lower() in text for alt in fact.split("|")) for fact in facts)


def invented(summary: Summary, dl: DeadLetter) -> list[str]:
    """Hosts, URLs, versions and numbers in the model's text that the dead letter does not hold."""
    fields = dl.model_dump(mode="json")
    # the JSON (numbers, names) and the texts as written (JSON escapes a quote inside a URL)
    source = " ".join([json.dumps(fields), *(v for v in fields.values() if isinstance(v, str))]).lower()
    model_text = " ".join([summary.title, summary.likely_cause, *summary.next_steps])
    return [c for c in _CLAIMS.findall(model_text) if c.lower().strip(".") not in source]


@dataclass
class Row:
    name: str
    results: list[dict[str, Any]] = field(default_factory=list)

    def line(self) -> str:
        n = len(self.results) or 1
        seconds = [r["seconds"] for r in self.results] or [0.0]
        facts = sum(r["facts"] for r in self.results), sum(r["facts_total"] for r in self.results)
        return (f"| {self.name} | {len(self.results)} | {pct(sum(r['source'] == 'openclaw' for r in self.results), n)}"
                f" | {pct(sum(bool(r['repairs']) for r in self.results), n)}"
                f" | {pct(sum(r['runbook_ok'] for r in self.results), n)} | {pct(facts[0], facts[1] or 1)}"
                f" | {sum(bool(r['invented']) for r in self.results)}"
                f" | {statistics.median(seconds):.1f} / {max(seconds):.1f}"
                f" | {self.median('prompt_tokens'):.0f} / {self.median('completion_tokens'):.0f} |")

    def median(self, key: str) -> float:
        return statistics.median([r[key] for r in self.results] or [0])


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%"


def settings_for(url: str | None, response_format: str, timeout_s: float, redis_url: str,
                 per_cause: bool = True) -> Settings:
    openclaw = None if url is None else {
        "url": url, "token": TOKEN, "cache_ttl_s": 0, "calls_per_minute": 0, "timeout_s": timeout_s,
        "breaker_failures": 1000, "max_concurrency": 1, "response_format": response_format,
        "summary_per_cause": per_cause}
    return Settings(redis={"url": redis_url, "consumer_id": "bench"}, openclaw=openclaw,
                    sinks=[{"name": "console", "type": "console"}])


async def run_corpus(name: str, url: str | None, entries: list[dict[str, Any]], args: argparse.Namespace,
                     per_cause: bool = True) -> Row:
    row = Row(name)
    settings = settings_for(url, args.response_format, args.timeout, args.redis_url, per_cause)
    client = aioredis.Redis.from_url(args.redis_url)
    async with httpx.AsyncClient(trust_env=False) as http:
        runbooks = RunbookCatalog.load(Path(args.runbooks) if args.runbooks else None)
        metrics = Metrics()
        summarizer = build_summarizer(settings, runbooks, client, http, metrics, Health())
        for entry in entries:
            dl = dead_letter(entry)
            before = tokens_so_far(metrics)
            started = time.perf_counter()
            summary = await summarizer.summarize(dl)
            took = time.perf_counter() - started
            prompt_tokens, completion_tokens = (a - b for a, b in zip(tokens_so_far(metrics), before, strict=True))
            row.results.append({
                "id": entry["id"], "source": summary.source.value, "reason": summary.fallback_reason,
                "repairs": list(summary.repairs), "runbook": summary.runbook_hint,
                "runbook_ok": summary.runbook_hint in entry["runbooks"] or (not summary.runbook_hint
                                                                         and "unknown" in entry["runbooks"]),
                "facts": facts_stated(summary, entry["facts"]), "facts_total": len(entry["facts"]),
                "invented": invented(summary, dl) if summary.source != "fallback" else [],
                "seconds": took, "title": summary.title, "likely_cause": summary.likely_cause,
                "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            })
            if args.verbose:
                r = row.results[-1]
                print(f"  {name} {entry['id']}: {r['source']} {r['reason'] or ''} {r['repairs']} "
                      f"rb={r['runbook']}{'' if r['runbook_ok'] else ' (miss)'} facts {r['facts']}/{r['facts_total']}"
                      f" {took:.1f}s {r['invented'] or ''}", flush=True)
        await summarizer.aclose()
    await client.aclose()
    return row


def tokens_so_far(metrics: Metrics) -> tuple[float, float]:
    """Prompt and completion tokens counted so far (every model and source)."""
    totals = {"prompt": 0.0, "completion": 0.0}
    for family in metrics.summary_tokens.collect():
        for sample in family.samples:
            if sample.name.endswith("_total"):
                totals[sample.labels["kind"]] += sample.value
    return totals["prompt"], totals["completion"]


def favour(pid: int, nice: int) -> None:
    """Give a child's session `nice` (Linux autogroups): the model's share of a busy machine.

    With autogroups on (the default), each session shares the CPU fairly with every other, so plain
    renice does not help a model server among other sessions' test runs; the autogroup's nice does.
    Needs root for a negative value; without it the bench says so and runs as it is.
    """
    if not nice:
        return
    try:
        Path(f"/proc/{pid}/autogroup").write_text(str(nice), encoding="ascii")
    except OSError as exc:
        print(f"  --favour {nice}: not applied ({exc.strerror})", flush=True)


async def run_config(config: str, entries: list[dict[str, Any]], args: argparse.Namespace,
                     workdir: Path) -> list[Row]:
    if config == "fallback":
        return [await run_corpus("fallback", None, entries, args)]
    path, _, model = config.partition(":")
    model = model or "qwen15"
    missing = find_model(model) or (find_gateway() if path == "gateway" else "")
    if missing:
        raise SystemExit(f"bench_quality: {missing}")
    server: ModelServer = start_model_server(workdir / model, model, threads=args.threads)
    favour(server.process.pid, args.favour)
    try:
        if path == "direct":
            rows = await run_direct(model, server.url, entries, args)
            print(where_the_time_goes(server), flush=True)
            return rows
        gateway = start_gateway(server.url, workdir / f"gw-{model}", token=TOKEN)
        favour(gateway.process.pid, args.favour)
        try:
            rows = [await run_corpus(f"{model} via gateway", gateway.url, entries, args)]
            sizes = [json.loads(line) for line in server.calls]
            if sizes:
                print(f"  gateway -> model: system prompt {sizes[-1]['system_chars']} chars, "
                      f"{sizes[-1]['usage']['prompt_tokens']} prompt tokens, response_format "
                      f"{sizes[-1]['response_format']}, tools {sizes[-1]['tools']}", flush=True)
            return rows
        finally:
            gateway.stop()
    finally:
        server.stop()


def where_the_time_goes(server: ModelServer) -> str:
    """The model server's own split of its calls: evaluating the prompt (to the first token), then generating."""
    calls = [json.loads(line) for line in server.calls]
    if not calls:
        return "  model server: no call logged"
    first = statistics.median(c.get("first_token_seconds", 0.0) for c in calls)
    rates = [c["usage"]["completion_tokens"] / (c["seconds"] - c["first_token_seconds"])
             for c in calls if c.get("first_token_seconds") is not None and c["seconds"] > c["first_token_seconds"]]
    grammar = statistics.median(c.get("grammar_seconds", 0.0) for c in calls)
    whole = statistics.median(c.get("call_seconds", c["seconds"]) for c in calls)
    return (f"  model server, {len(calls)} calls: median {whole:.1f} s a call: grammar {grammar:.1f} s, "
            f"prompt {first:.1f} s (to the first token), then generating at "
            f"{statistics.median(rates) if rates else 0:.1f} tokens/s")


async def run_direct(model: str, url: str, entries: list[dict[str, Any]], args: argparse.Namespace) -> list[Row]:
    """One row per `--per-cause` setting."""
    rows = []
    for setting in args.per_cause:
        name = f"{model} direct" + ("" if args.per_cause == ["on"] else f", per cause {setting}")
        rows.append(await run_corpus(name, url, entries, args, per_cause=setting == "on"))
    return rows


def shared(entry: dict[str, Any]) -> bool:
    return cause_of(entry["last_error"]).shared


async def main(args: argparse.Namespace) -> None:
    paths = corpus_paths(args.corpus)
    entries = load_corpora(paths, args.limit, args.every)
    if args.shared_only:
        entries = [e for e in entries if shared(e)]
    print(f"corpus: {' + '.join(p.name for p in paths)}, {len(entries)} real failures; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
          f"response_format {args.response_format}; model threads {args.threads}; favour {args.favour}", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="dlq-bench-quality-"))
    rows = []
    redis_server = start_private_redis(appendonly=False)  # the gate and cache talk to a real Redis, as in
    args.redis_url = redis_server.url  # the service (a dead one made each summary ~3.5 s slower: retries)
    try:
        for config in args.config:
            for row in await run_config(config, entries, args, workdir):
                rows.append(row)
                print(row.line(), f"(load {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        redis_server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print("\n| configuration | alerts | openclaw | repaired | runbook fits | facts stated | invented | s med / max"
          " | tokens in / out |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(row.line())
    if args.out:
        Path(args.out).write_text(json.dumps({r.name: r.results for r in rows}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", nargs="+", default=["fallback", "direct:qwen15"],
                        help="fallback, direct:<model>, gateway:<model> (models: qwen15, qwen05)")
    parser.add_argument("--corpus", default="corpus",
                        help="corpus (training: runbook patterns were written from it), heldout, both, or a path")
    parser.add_argument("--limit", type=int, default=None, help="first N corpus entries only")
    parser.add_argument("--every", type=int, default=1, help="every Nth corpus entry (a spread-out sample)")
    parser.add_argument("--response-format", default="json_schema", choices=["json_schema", "json_object", "none"])
    parser.add_argument("--timeout", type=float, default=180.0, help="openclaw.timeout_s (quality, not latency)")
    parser.add_argument("--threads", type=int, default=None, help="model server CPU threads (default 2)")
    parser.add_argument("--favour", type=int, default=0, metavar="NICE",
                        help="autogroup nice of the model server and gateway, e.g. -15 on a busy machine (root)")
    parser.add_argument("--runbooks", help="another runbook folder (e.g. an older runbooks/failures)")
    parser.add_argument("--out", help="write every summary as JSON to this file")
    parser.add_argument("--shared-only", action="store_true",
                        help="only failures whose cause is shared (dependency unreachable, unavailable, rate-limited)")
    parser.add_argument("--per-cause", nargs="+", choices=["on", "off"], default=["on"],
                        help="openclaw.summary_per_cause for direct:<model> rows; `on off` runs both")
    parser.add_argument("--verbose", action="store_true", help="one line per dead letter")
    asyncio.run(main(parser.parse_args()))

#!/usr/bin/env python3
"""Checks that every Prometheus scrape configuration the docs give for xtel-exporter (a job with
a target on its port, 9465) names the job the alerting rules select (`up{job="..."}` in
monitoring/rules): an operator who copies the quickstart's configuration and then loads the
rules must not get XtelExporterAbsent for a healthy exporter.

Usage: scrape_job_test.py SOURCE_DIR"""
import pathlib
import re
import sys

import yaml

EXPORTER_PORT = ":9465"


def rule_jobs(rules_dir: pathlib.Path) -> set:
    jobs = set()
    for path in sorted(rules_dir.glob("*.rules.yaml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                jobs.update(re.findall(r'\bup\{[^}]*\bjob="([^"]+)"', rule["expr"]))
    return jobs


def doc_jobs(docs_dir: pathlib.Path) -> list:
    """(doc, job) for each scrape job with a target on xtel-exporter's port, from every YAML
    block of the docs that holds scrape_configs (a heredoc's body included)."""
    found = []
    for path in sorted(docs_dir.glob("*.md")):
        text = path.read_text()
        for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M):
            start = block.find("scrape_configs:")
            if start < 0:
                continue
            # The configuration's own lines: from its first key to the heredoc's end, if any.
            body = block[block.rfind("\n", 0, block.find("global:") if "global:" in block
                                     else start) + 1:]
            body = body.split("\nEOF")[0]
            config = yaml.safe_load(body)
            for job in config.get("scrape_configs", []):
                targets = [t for c in job.get("static_configs", []) for t in c.get("targets", [])]
                if any(t.endswith(EXPORTER_PORT) for t in targets):
                    found.append((path.name, job["job_name"]))
    return found


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    expected = rule_jobs(root / "monitoring" / "rules")
    if len(expected) != 1:
        print(f"the alerting rules select {sorted(expected)}: expected one job for xtel-exporter")
        return 1
    job = expected.pop()
    docs = doc_jobs(root / "docs")
    if not docs:
        print("no doc gives a scrape configuration for xtel-exporter: the check found nothing")
        return 1
    wrong = [f"{doc}: job_name {name!r}" for doc, name in docs if name != job]
    for line in wrong:
        print(f"{line}, where the alerting rules select job={job!r}")
    print(f"{len(docs)} scrape configurations for xtel-exporter in the docs, "
          f"{len(docs) - len(wrong)} naming job {job!r}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())

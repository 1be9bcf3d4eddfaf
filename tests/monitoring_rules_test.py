#!/usr/bin/env python3
"""Checks that the promtool unit tests of monitoring/rules cover every alert both ways: for each
alert of the alerting rules, at least one alert_rule_test case where it must fire (exp_alerts
not empty) and one where it must not (exp_alerts empty), and every recording rule is either
evaluated by a promql_expr_test or used by an alert. promtool itself checks the values.

Usage: monitoring_rules_test.py RULES_DIR"""
import pathlib
import re
import sys

import yaml


def main() -> int:
    rules_dir = pathlib.Path(sys.argv[1])
    alerts, records, exprs = set(), set(), []
    for path in sorted(rules_dir.glob("*.rules.yaml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    alerts.add(rule["alert"])
                    exprs.append(rule["expr"])
                else:
                    records.add(rule["record"])
    fires, quiet, evaluated = set(), set(), []
    for path in sorted((rules_dir / "tests").glob("*.test.yaml")):
        for case in yaml.safe_load(path.read_text())["tests"]:
            for t in case.get("alert_rule_test", []):
                (fires if t.get("exp_alerts") else quiet).add(t["alertname"])
            evaluated += [t["expr"] for t in case.get("promql_expr_test", [])]
    problems = []
    for name in sorted(alerts):
        if name not in fires:
            problems.append(f"alert {name}: no test case where it must fire")
        if name not in quiet:
            problems.append(f"alert {name}: no test case where it must not fire")
    # A recording rule is covered when a promql_expr_test or an alert names it (the alerts are
    # tested both ways above).
    used = " ".join(evaluated + exprs)
    for name in sorted(records):
        if not re.search(re.escape(name) + r"(?![A-Za-z0-9_:])", used):
            problems.append(f"recording rule {name}: neither evaluated by a test nor used by an alert")
    for p in problems:
        print(p, file=sys.stderr)
    print(f"{len(alerts)} alerts, {len(records)} recording rules, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

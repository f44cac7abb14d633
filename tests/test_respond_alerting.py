"""`dyno respond` behind the real alerting engines: Prometheus 2.42 and Alertmanager 0.25 as Debian ships
them, run with deploy/'s alert rules and route (only their minutes shortened to seconds), watching a
real 3-rank PyTorch job behind three daemons (tests/alerting.py). One rank slowed from outside fires
MsMonitorSlowestRank; Alertmanager posts it to `dyno respond`, which traces every rank at the same steps
and records an incident naming that rank; the rank back to speed resolves it, and nothing more is
traced. An Alertmanager holding the wrong token is refused, and records nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pytest

import engines
from alerting import ALERT, HOSTS, ITERATIONS, JOB_ID, incidents, respond_args, scene, token_file, webhook_url
from engines import ALERTMANAGER, Alertmanager, alertmanager_config, differences, load
from harness import REPO, wait_until
from peers import ALERTING_ENGINES, need
from respond_harness import RespondProcess

SLOW_RANK = 1


def test_the_engines_run_deploys_files_with_only_timings_and_addresses_changed(tmp_path: Path) -> None:
    rules = engines.rules()
    assert differences(load(engines.RULES), rules) == [
        ("groups", 0, "rules", i, "for") for i, _ in enumerate(rules["groups"][0]["rules"])
    ]
    route = alertmanager_config("http://127.0.0.1:1/alerts", tmp_path / "token")
    webhook = ("receivers", 1, "webhook_configs", 0)
    assert set(differences(load(engines.ROUTE), route)) == {
        ("route", "routes", 0, "group_interval"),
        ("route", "routes", 0, "group_wait"),
        (*webhook, "http_config", "authorization", "credentials_file"),
        (*webhook, "url"),
    }
    prometheus = engines.prometheus_config(["127.0.0.2:1"], tmp_path / "rules.yml", "127.0.0.1:2")
    (deployed,) = [j for j in load(engines.SCRAPE)["scrape_configs"] if j["job_name"] == engines.NODES_JOB]
    (scraped,) = prometheus["scrape_configs"]
    assert set(differences(deployed, scraped)) == {("scrape_interval",), ("static_configs", 0, "targets")}


def test_the_docs_give_the_route_verbatim() -> None:
    assert engines.ROUTE.read_text() in (REPO / "docs" / "respond.md").read_text()


def traced(incident: Dict[str, Any]) -> bool:
    return incident.get("action") == "traced"


def analysed(incident: Dict[str, Any]) -> bool:
    """Traced, and the traces analysed (the record is written before the analysis, and again after)."""
    return traced(incident) and incident.get("analysis") is not None


@pytest.mark.torch
def test_a_slowed_rank_fires_the_alert_and_respond_traces_every_rank_of_the_job_once(tmp_path: Path) -> None:
    need(ALERTING_ENGINES)
    # One trace an hour: the test's 8 s `for:` (deploy's is 5 minutes) lets a loaded machine's noise on
    # another rank fire now and then (a few pending seconds are common); such an alert is recorded, and
    # not traced, rather than making the test depend on the machine's quiet.
    with scene(tmp_path, respond_flags=("--max", "1/hour")) as job:
        job.slow(SLOW_RANK)
        (incident,) = job.wait(
            lambda: [i for i in job.incidents() if analysed(i)], 40, what="an incident traced and analysed"
        )
        alert = incident["alert"]
        assert (alert["name"], alert["labels"]["job_id"], alert["labels"]["rank"]) == (
            ALERT, JOB_ID, str(SLOW_RANK)
        )  # fmt: skip
        assert (incident["job_id"], incident["suspect"]["rank"]) == (int(JOB_ID), SLOW_RANK)
        ranks: List[Dict[str, Any]] = incident["ranks"]
        assert sorted(r["rank"] for r in ranks) == list(range(len(HOSTS)))
        steps = (incident["steps"]["start"], incident["steps"]["stop"])  # the stop step is exclusive
        assert steps[1] - steps[0] == ITERATIONS
        assert {(r["start_step"], r["stop_step"]) for r in ranks} == {steps}  # the same steps on every rank
        folder = tmp_path / "respond" / "incidents" / incident["id"]
        for rank in ranks:
            assert rank["state"] == "finished" and rank["files"], rank
            assert all((folder / f).exists() for f in rank["files"]), rank
        assert incident["hta_ranks"] == [0, 1, 2]
        assert incident["analysis"]["slowest_rank"] == SLOW_RANK, incident["analysis"]

        job.fast(SLOW_RANK)
        (resolved,) = job.wait(
            lambda: [i for i in job.incidents() if i["id"] == incident["id"] and i.get("resolved_at")],
            30,
            what="the alert resolved",
        )
        assert resolved["ranks"] == ranks
        # Nothing more traced: any later incident (another rank's noise) is recorded, not traced, and
        # each daemon was sent the one trace.
        later = [i for i in job.incidents() if i["id"] != incident["id"]]
        assert all(i["action"] == "not traced: rate limit (--max 1/hour)" for i in later), later
        traces = [job.cluster.dyno_json("--hostname", host, "trace")["traces"] for host in HOSTS]
        assert [len(t) for t in traces] == [1, 1, 1], traces


def test_an_alertmanager_with_the_wrong_token_is_refused_and_nothing_is_recorded(tmp_path: Path) -> None:
    need(ALERTING_ENGINES)
    right, wrong = token_file(tmp_path / "right.token"), token_file(tmp_path / "wrong.token", "not-it")
    respond = RespondProcess(respond_args(tmp_path / "respond", right)).start()
    url = webhook_url(respond)
    refused = Alertmanager(ALERTMANAGER, tmp_path / "wrong", alertmanager_config(url, wrong))
    heard = Alertmanager(ALERTMANAGER, tmp_path / "right", alertmanager_config(url, right))
    try:
        refused.start().post([slow_rank_alert()])
        wait_until(lambda: "unexpected status code 401" in refused.log(), 20, what="Alertmanager told 401")
        assert incidents(respond) == []
        # The control: the same alert through an Alertmanager with the right token is recorded (not
        # traced: no daemon runs behind the hosts).
        heard.start().post([slow_rank_alert()])
        (incident,) = wait_until(lambda: incidents(respond), 20, what="the alert recorded")
        assert not traced(incident) and incident["job_id"] == int(JOB_ID), incident
    finally:
        refused.stop()
        heard.stop()
        respond.stop()


def slow_rank_alert() -> Dict[str, Any]:
    """MsMonitorSlowestRank for rank 1 of the job, as Prometheus posts it to Alertmanager."""
    labels = {"alertname": ALERT, "job": JOB_ID, "job_id": JOB_ID, "rank": str(SLOW_RANK), "kind": "Kernel"}
    return {"labels": {**labels, "name": "aten::sort"}, "annotations": {"summary": "rank 1 is slow"}}

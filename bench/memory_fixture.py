"""Writes `bench/memory_relevance.json`, the labelled relevance fixture of benchmark 12: 1,000 ops facts and 50
questions, each naming the fact that answers it. The questions are worded as people ask (other words, other
forms: "who is on the hook for", "runs out of space"), sharing with their fact only some of its words, while
other facts share words with them too (the same host, service or environment). Deterministic (seeded).

    python -m bench.memory_fixture     # rewrites the file (it ships with the benchmark; rerun only to change it)
"""

from __future__ import annotations

import json
import random
from pathlib import Path

FIXTURE = Path(__file__).resolve().parent / "memory_relevance.json"

SERVICES = ["nginx", "postgres", "redis", "kafka", "elasticsearch", "grafana", "prometheus", "rabbitmq", "haproxy",
            "memcached", "consul", "vault", "etcd", "minio", "jenkins", "keycloak", "clickhouse", "mongodb"]
ENVS = ["prod", "staging", "eu-west", "us-east", "ap-south", "canary"]
PEOPLE = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory", "oscar",
          "peggy", "trent", "victor", "walter"]
TEAMS = ["platform", "payments", "search", "identity", "data", "edge", "billing", "mobile"]
JOBS = ["backup", "logrotate", "reindex", "vacuum", "compaction", "snapshot", "export", "cleanup"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
HOSTS = [f"{kind}{n:02d}" for kind in ("web", "db", "cache", "queue", "worker", "lb") for n in range(1, 41)]

# (fact template, question templates: each shares only part of the fact's words)
TEMPLATES: list[tuple[str, list[str]]] = [
    ("{host} is flaky on {day}s; restart {service} there before paging anyone",
     ["{host} keeps failing again, what do we usually do?", "is {host} known to be unreliable?"]),
    ("{person} owns the {service} deployment in {env}",
     ["who is on the hook for {service} in {env}?", "who owns {service} on {env}"]),
    ("the {service} cluster in {env} listens on port {port}",
     ["which port does {service} use in {env}?", "what port is the {env} {service} on"]),
    ("{host} runs out of disk when the nightly {job} job runs",
     ["DiskFull alert on {host}, anything known?", "why does {host} run out of space at night"]),
    ("alerts for {service} in {env} are routed to the {team} team",
     ["which team handles {service} alerts in {env}?", "who gets paged for {env} {service}"]),
    ("{service} on {host} needs {gb} GB of memory or it gets OOM-killed",
     ["{service} was OOM killed on {host}", "how much memory does {service} need on {host}?"]),
    ("the {env} {service} certificate expires every {days} days and is renewed by cron",
     ["certificate expiry warning for {service} in {env}", "when does the {service} cert in {env} renew?"]),
    ("to fail over {service} in {env}, promote the replica on {host}",
     ["how do we fail over {service} in {env}?", "{service} primary down in {env}, where is the replica"]),
    ("the {job} job for {service} in {env} takes about {minutes} minutes",
     ["how long does the {service} {job} take in {env}?", "is the {job} of {service} in {env} stuck?"]),
    ("{host} sits behind the {env} load balancer and serves {service}",
     ["what does {host} serve?", "which load balancer is {host} behind"]),
]


def make() -> dict[str, object]:
    rnd = random.Random(39)
    facts: list[str] = []
    labels: list[int] = []  # each fact's template
    slots_of: list[dict[str, str]] = []  # each fact's slot values
    seen: set[str] = set()
    while len(facts) < 1000:
        t = rnd.randrange(len(TEMPLATES))
        slots = {"host": rnd.choice(HOSTS), "service": rnd.choice(SERVICES), "env": rnd.choice(ENVS),
                 "person": rnd.choice(PEOPLE), "team": rnd.choice(TEAMS), "job": rnd.choice(JOBS),
                 "day": rnd.choice(DAYS), "port": str(rnd.randrange(1024, 65000)), "gb": str(rnd.randrange(2, 64)),
                 "days": str(rnd.choice([30, 60, 90])), "minutes": str(rnd.randrange(5, 240))}
        fact = TEMPLATES[t][0].format(**slots)
        key = TEMPLATES[t][1][0].format(**slots)  # one fact per question: no two facts answer the same one
        if fact in seen or key in seen:
            continue
        seen.update((fact, key))
        facts.append(fact)
        labels.append(t)
        slots_of.append(slots)
    questions = []
    for index in rnd.sample(range(len(facts)), 50):
        question = rnd.choice(TEMPLATES[labels[index]][1]).format(**slots_of[index])
        questions.append({"question": question, "answer": index})
    return {"facts": facts, "questions": questions}


def main() -> None:
    FIXTURE.write_text(json.dumps(make(), indent=1) + "\n")
    print(f"wrote {FIXTURE}")


if __name__ == "__main__":
    main()

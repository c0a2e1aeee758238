"""The deployment examples a user copies (docs/examples/): the GitHub Actions workflow is a
valid workflow by SchemaStore's schema and the Kubernetes Job a valid batch/v1 Job by the
Kubernetes schema (both vendored in tests/data/schemas, see its README); every golive
command in them is one golive accepts; the API key travels by a variable the config names,
never on a command line; the bundle is kept; and the outcome gates the run."""

from __future__ import annotations

import copy
import json
import re
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource

from golive.cli.parser import build_parser
from golive.results import Outcome

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "docs" / "examples"
SCHEMAS = REPO / "tests" / "data" / "schemas"
KEY_VARIABLE = "VLLM_API_KEY"


def _load(name: str) -> dict[str, Any]:
    document = yaml.safe_load((EXAMPLES / name).read_text())
    assert isinstance(document, dict)
    if True in document:  # YAML 1.1 reads the key `on` as true; GitHub (YAML 1.2) does not
        document["on"] = document.pop(True)
    return document


def _manifest() -> list[dict[str, Any]]:
    """The Job's manifest: the Job and the access it is given, as `kubectl apply -f` reads."""
    documents = list(yaml.safe_load_all((EXAMPLES / "k8s-job.yaml").read_text()))
    assert all(isinstance(d, dict) for d in documents)
    return documents


def _job() -> dict[str, Any]:
    jobs = [d for d in _manifest() if d["kind"] == "Job"]
    assert len(jobs) == 1
    return jobs[0]


def _schema(name: str) -> dict[str, Any]:
    schema = json.loads((SCHEMAS / name).read_text())
    assert isinstance(schema, dict)
    return schema


def _workflow_errors(workflow: dict[str, Any]) -> list[str]:
    schema = _schema("github-workflow.json")
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [e.message for e in validator.iter_errors(workflow)]


def _job_errors(job: dict[str, Any]) -> list[str]:
    definitions = _schema("k8s-v1.33.0-local-strict-_definitions.json")
    registry: Registry[Any] = Registry().with_resource(
        definitions["$id"], Resource.from_contents(definitions)
    )
    schema = _schema("k8s-v1.33.0-local-strict-job-batch-v1.json")
    validator = jsonschema.Draft202012Validator(schema, registry=registry)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(job)]


def _steps() -> list[dict[str, Any]]:
    steps = _load("github-actions.yml")["jobs"]["acceptance"]["steps"]
    assert isinstance(steps, list)
    return steps


def _golive_commands() -> list[list[str]]:
    """Every golive command line of the workflow's steps and the Job's container."""
    commands = [
        shlex.split(line.split("#")[0])
        for step in _steps()
        for line in str(step.get("run", "")).splitlines()
        if line.strip().startswith("golive ")
    ]
    container = _job()["spec"]["template"]["spec"]["containers"][0]
    return [*commands, ["golive", *container["args"]]]


def test_the_workflow_is_valid_by_schemastore() -> None:
    """GitHub would accept the workflow: it validates against SchemaStore's schema, which
    does reject a job without `runs-on` (so the check can fail)."""
    workflow = _load("github-actions.yml")
    assert _workflow_errors(workflow) == []
    broken = copy.deepcopy(workflow)
    del broken["jobs"]["acceptance"]["runs-on"]
    assert _workflow_errors(broken)


def test_the_job_is_a_valid_batch_v1_job() -> None:
    """`kubectl apply` would accept the Job: it validates against the strict batch/v1 Job
    schema, which rejects a misspelt field and a wrongly typed one."""
    job = _job()
    assert _job_errors(job) == []
    misspelt = copy.deepcopy(job)
    misspelt["spec"]["template"]["spec"]["containers"][0]["envv"] = []
    assert _job_errors(misspelt)
    mistyped = copy.deepcopy(job)
    mistyped["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] = "yes"
    assert _job_errors(mistyped)


def test_every_golive_command_in_the_examples_is_accepted() -> None:
    """Each golive command the examples run parses with golive's own command line, so an
    example never drifts from the flags golive has."""
    commands = _golive_commands()
    assert {c[1] for c in commands} >= {"run", "config"}
    parser = build_parser()
    for command in commands:
        assert command[0] == "golive"
        parser.parse_args(command[1:])


def test_the_api_key_never_appears_on_a_command_line() -> None:
    """The key comes from a secret into an environment variable that golive's config names
    (target.api_key_env), given to the golive step alone: no other step (the log capture,
    the upload) holds it, and no command line, step input or script expands it or a secret."""
    workflow = _load("github-actions.yml")
    assert KEY_VARIABLE not in workflow["jobs"]["acceptance"].get("env", {})
    holding = [s for s in _steps() if KEY_VARIABLE in s.get("env", {})]
    assert [s.get("id") for s in holding] == ["golive"]
    assert holding[0]["env"][KEY_VARIABLE] == "${{ secrets.VLLM_API_KEY }}"
    assert "golive run " in holding[0]["run"]
    for step in _steps():
        script = str(step.get("run", "")) + json.dumps(step.get("with", {}))
        assert "secrets." not in script, step
        assert not re.search(rf"\$\{{?{KEY_VARIABLE}\b", script), step
    assert any(f"api_key_env: {KEY_VARIABLE}" in str(s.get("run", "")) for s in _steps())
    container = _job()["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert "secretKeyRef" in env[KEY_VARIABLE]["valueFrom"]
    assert KEY_VARIABLE not in " ".join(container["args"])
    for command in _golive_commands():
        assert "--api-key" not in command


def test_the_workflow_gives_golive_the_engines_startup_log() -> None:
    """Without the server's startup log the chain cannot be proven and every run is hold:
    `golive run` is given `--log FILE`, and an earlier step writes FILE from the engine's
    own log (kubectl logs of the deployment under test)."""
    steps = _steps()
    at = next(i for i, s in enumerate(steps) if "golive run " in str(s.get("run", "")))
    run = next(c for c in _golive_commands() if c[1] == "run" and "--junit" in c)
    assert "--log" in run
    log = run[run.index("--log") + 1]
    writers = [
        s
        for s in steps[:at]
        if re.search(rf"kubectl .*\blogs\b.*>\s*{re.escape(log)}\s*$", str(s.get("run", "")))
    ]
    assert writers, f"no step before the run writes {log} from the engine's log"
    assert "--since" not in writers[0]["run"]  # the log from the engine's start


def _rules(kind: str, subject: str, namespace: str | None) -> list[dict[str, Any]]:
    """The rules of every `kind` (Role, ClusterRole) bound to the ServiceAccount `subject`."""
    documents = _manifest()
    bound = {
        d["roleRef"]["name"]
        for d in documents
        if d["kind"] in ("RoleBinding", "ClusterRoleBinding")
        and d["roleRef"]["kind"] == kind
        and d["metadata"].get("namespace") in (namespace, None)
        and {"kind": "ServiceAccount", "name": subject, "namespace": namespace} in d["subjects"]
    }
    return [
        rule
        for d in documents
        if d["kind"] == kind and d["metadata"]["name"] in bound
        for rule in d["rules"]
    ]


def _allows(rules: list[dict[str, Any]], resource: str, verb: str) -> bool:
    return any(
        "" in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules
    )


def test_the_job_reads_the_engine_pods_and_their_logs() -> None:
    """The Job's golive reads the engine pods in-cluster (--k8s-namespace, --selector: their
    log is the startup log), as a ServiceAccount whose token is mounted and which may list
    the pods, read their logs and their nodes."""
    job = _job()
    namespace = job["metadata"]["namespace"]
    spec = job["spec"]["template"]["spec"]
    args = spec["containers"][0]["args"]
    assert args[args.index("--k8s-namespace") + 1] == namespace
    assert "=" in args[args.index("--selector") + 1]
    account = spec["serviceAccountName"]
    assert spec.get("automountServiceAccountToken", True) is True
    assert any(
        d["kind"] == "ServiceAccount" and d["metadata"]["name"] == account for d in _manifest()
    )
    pods = _rules("Role", account, namespace)
    assert _allows(pods, "pods", "list")
    assert _allows(pods, "pods/log", "get")
    assert _allows(_rules("ClusterRole", account, namespace), "nodes", "get")
    assert all(set(r["verbs"]) <= {"get", "list"} for r in pods)


def test_each_job_run_writes_its_own_bundle() -> None:
    """The bundle's folder is named after the pod (the downward API), so a second run never
    writes into an earlier run's sealed bundle."""
    container = _job()["spec"]["template"]["spec"]["containers"][0]
    out = _out(["golive", *container["args"]])
    names = re.findall(r"\$\((\w+)\)", out)
    assert names
    env = {e["name"]: e for e in container["env"]}
    assert env[names[0]]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"


def _out(command: list[str]) -> str:
    return command[command.index("--out") + 1]


def test_the_bundle_is_kept_whatever_the_outcome() -> None:
    """The workflow uploads the run's --out folder even when the gate fails; the Job writes
    its bundle under a mount of a persistent volume claim."""
    run = next(c for c in _golive_commands() if c[1] == "run" and "--junit" in c)
    upload = next(
        s for s in _steps() if str(s.get("uses", "")).startswith("actions/upload-artifact")
    )
    assert upload["if"] == "always()"
    assert _out(run) in upload["with"]["path"].split()
    spec = _job()["spec"]["template"]["spec"]
    container = spec["containers"][0]
    out = _out(["golive", *container["args"]])
    mounts = [
        m for m in container["volumeMounts"] if out.startswith(m["mountPath"].rstrip("/") + "/")
    ]
    assert len(mounts) == 1
    volume = next(v for v in spec["volumes"] if v["name"] == mounts[0]["name"])
    assert "persistentVolumeClaim" in volume


@pytest.mark.parametrize("outcome", [o for o in Outcome if o.exit_code != 0])
def test_the_workflow_gate_fails_every_outcome_but_go_live(outcome: Outcome) -> None:
    """Each outcome that is not go-live has its own arm in the gate, which fails the job
    (observe-with-limits only unless the run was asked to accept limits)."""
    gate = next(s for s in _steps() if s.get("name") == "Gate on the outcome")["run"]
    arm = re.search(rf"^\s*{outcome.exit_code}\)(.*?);;", gate, re.S | re.M)
    assert arm is not None, outcome
    assert "exit 1" in arm.group(1)
    assert outcome.value in arm.group(1)


def test_the_job_runs_as_the_images_non_root_user() -> None:
    """The pod runs as a non-root user, the same uid the Dockerfile's USER sets, with no
    privilege escalation and a read-only root filesystem."""
    spec = _job()["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    users = re.findall(r"^USER\s+(\d+)", (REPO / "Dockerfile").read_text(), re.M)
    assert users
    assert spec["securityContext"]["runAsUser"] == int(users[-1]) != 0
    container = spec["securityContext"], spec["containers"][0]["securityContext"]
    assert container[1]["allowPrivilegeEscalation"] is False
    assert container[1]["readOnlyRootFilesystem"] is True

"""The Kubernetes manifests apply on a default Knative Serving install, as docs/deploy.md says to apply them.

Held here (part of scripts/contract.sh, so of `make test`):
- the Knative Service, as written and as rendered for each stage, uses only fields Knative Serving accepts with no
  feature flag set (its field allow-list: knative/serving pkg/apis/serving/fieldmask.go and the defaults of
  pkg/apis/config/features.go, read at commit 98e5ef9 of 2026-08-21). A pod-level securityContext, for one, needs
  `kubernetes.podspec-securitycontext`, which a default install does not enable; the container's may carry the same
  settings. Also the revision's timeoutSeconds against Knative's default maximum (600 s);
- infra/knative/render.py, run as the documented command: it refuses each shipped stage until its placeholders are
  replaced, and a filled-in stage puts its namespace, image, Supabase project, PUSH_ENVIRONMENT and metrics namespace
  into every manifest that needs them, leaving no placeholder (one place per stage);
- docs/deploy.md's Knative commands: the migration Job is deleted before it is applied again, applied by its label
  before the rest, and waited for longer than its own deadline; `buildah push` uses the storage `make image` built in.

Prints `N passed, N failed`; exits non-zero on any failure, naming it.
"""
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile

import yaml

from contract_checks import check, report

ROOT = pathlib.Path(__file__).resolve().parents[2]
KNATIVE = ROOT / "infra" / "knative"
# Knative Serving's allow-list with the default features: field -> what is allowed inside it (None: any value).
# Lists apply their schema to each item.
SEED = {"type": None, "localhostProfile": None}
KEY_REF = {"name": None, "key": None, "optional": None}
PROBE = {
    "httpGet": {"host": None, "path": None, "scheme": None, "httpHeaders": None, "port": None},
    "tcpSocket": {"host": None, "port": None}, "exec": {"command": None}, "grpc": {"port": None, "service": None},
    "initialDelaySeconds": None, "timeoutSeconds": None, "periodSeconds": None, "successThreshold": None,
    "failureThreshold": None, "terminationGracePeriodSeconds": None,
}
CONTAINER = {
    "name": None, "args": None, "command": None, "workingDir": None, "image": None, "imagePullPolicy": None,
    "env": {"name": None, "value": None, "valueFrom": {"configMapKeyRef": KEY_REF, "secretKeyRef": KEY_REF}},
    "envFrom": {"prefix": None, "configMapRef": {"name": None, "optional": None},
                "secretRef": {"name": None, "optional": None}},
    "livenessProbe": PROBE, "readinessProbe": PROBE, "startupProbe": PROBE,
    "ports": {"containerPort": None, "name": None, "protocol": None},
    "resources": {"limits": None, "requests": None},
    "securityContext": {
        "capabilities": {"drop": None}, "readOnlyRootFilesystem": None, "runAsUser": None, "runAsGroup": None,
        "runAsNonRoot": None, "allowPrivilegeEscalation": None, "seccompProfile": SEED,
        "privileged": "false-only",
    },
    "terminationMessagePath": None, "terminationMessagePolicy": None,
    "volumeMounts": {"name": None, "readOnly": None, "mountPath": None, "subPath": None},
}
ITEMS = {"key": None, "path": None, "mode": None}
REVISION_SPEC = {
    # PodSpecMask's own fields (automountServiceAccountToken: only false).
    "serviceAccountName": None, "containers": CONTAINER, "imagePullSecrets": None, "enableServiceLinks": None,
    "automountServiceAccountToken": "false-only",
    "volumes": {
        "name": None,
        "secret": {"secretName": None, "items": ITEMS, "defaultMode": None, "optional": None},
        "configMap": {"name": None, "items": ITEMS, "defaultMode": None, "optional": None},
        "projected": None,
        "emptyDir": {"medium": None, "sizeLimit": None},  # kubernetes.podspec-volumes-emptydir is enabled by default
    },
    # The revision's own fields.
    "containerConcurrency": None, "timeoutSeconds": None, "responseStartTimeoutSeconds": None,
    "idleTimeoutSeconds": None,
}
MAX_REVISION_TIMEOUT_SECONDS = 600  # config-defaults' max-revision-timeout-seconds default



def disallowed(value, schema, path):
    """The paths under `value` that `schema` does not allow."""
    if schema is None:
        return []
    if schema == "false-only":
        return [] if value is False else [f"{path} (only `false` is accepted)"]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in disallowed(item, schema, f"{path}[{i}]")]
    if not isinstance(value, dict):
        return []
    out = []
    for key, inner in value.items():
        if key not in schema:
            out.append(f"{path}.{key}")
        else:
            out.extend(disallowed(inner, schema[key], f"{path}.{key}"))
    return out


def check_service(service, where):
    spec = service["spec"]["template"]["spec"]
    bad = disallowed(spec, REVISION_SPEC, "spec.template.spec")
    check(not bad, f"{where}: Knative Serving refuses on a default install: {', '.join(bad)}")
    check(spec.get("timeoutSeconds", 300) <= MAX_REVISION_TIMEOUT_SECONDS,
          f"{where}: timeoutSeconds is above Knative's default maximum {MAX_REVISION_TIMEOUT_SECONDS}")
    container = spec["containers"][0]
    security = container.get("securityContext", {})
    check(security.get("runAsNonRoot") is True and security.get("seccompProfile", {}).get("type") == "RuntimeDefault"
          and security.get("runAsUser") == 10001, f"{where}: the container does not run as user 10001, non-root, "
                                                   "with the runtime's seccomp profile")
    names = {p.get("name") for p in container.get("ports", [])}
    for probe in ("readinessProbe", "livenessProbe"):
        port = container.get(probe, {}).get("httpGet", {}).get("port")
        check(port is None or isinstance(port, int) or port in names,
              f"{where}: the {probe}'s port {port!r} is not the container's")


def render(argument):
    return subprocess.run([sys.executable, str(KNATIVE / "render.py"), str(argument)], capture_output=True,
                          text=True, cwd=ROOT)


def main():
    # The Service as written.
    check_service(yaml.safe_load((KNATIVE / "service.yaml").read_text()), "infra/knative/service.yaml")

    # Each shipped stage: refused until filled in; filled in, the values land everywhere, and nothing else differs.
    stages = sorted((KNATIVE / "stages").glob("*.env"))
    check([s.stem for s in stages] == ["dev", "prod"], f"the stages are {[s.stem for s in stages]}, not dev and prod")
    for stage in stages:
        refused = render(stage.stem)
        check(refused.returncode == 1 and "IMAGE is still the placeholder" in refused.stderr
              and "SUPABASE_URL is still the placeholder" in refused.stderr,
              f"render.py {stage.stem}: the shipped stage is not refused for its placeholders: {refused.stderr!r}")
        image = f"ghcr.io/acme/caregiver-push@sha256:{'ab' * 32}"
        project = "https://abcdefghijklmnopqrst.supabase.co"
        text = stage.read_text()
        text = re.sub(r"^IMAGE=.*$", f"IMAGE={image}", text, flags=re.M)
        text = re.sub(r"^SUPABASE_URL=.*$", f"SUPABASE_URL={project}", text, flags=re.M)
        expected = dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
        with tempfile.TemporaryDirectory() as work:
            filled = pathlib.Path(work) / f"{stage.stem}.env"
            filled.write_text(text)
            result = render(filled)
        check(result.returncode == 0, f"render.py {stage.stem} (filled in) failed: {result.stderr}")
        if result.returncode != 0:
            continue
        documents = [d for d in yaml.safe_load_all(result.stdout) if d]
        kinds = [d["kind"] for d in documents]
        check(kinds == ["Job", "Service", "CronJob"], f"render.py {stage.stem} prints {kinds}")
        for leftover in ("SET-BY-STAGE", "YOUR-", "registry.example.com", "image: caregiver-push\n"):
            body = "\n".join(l for l in result.stdout.splitlines() if not l.lstrip().startswith("#")) + "\n"
            check(leftover not in body, f"render.py {stage.stem} leaves the placeholder {leftover.strip()!r}")
        for document in documents:
            kind = document["kind"]
            check(document["metadata"]["namespace"] == expected["NAMESPACE"], f"{stage.stem}: {kind}'s namespace")
            component = document["metadata"].get("labels", {}).get("app.kubernetes.io/component")
            check(component == {"Job": "migration", "Service": "api", "CronJob": "sweep"}[kind],
                  f"{stage.stem}: {kind} is labelled component={component}")
            pod = (document["spec"]["template"]["spec"] if kind != "CronJob"
                   else document["spec"]["jobTemplate"]["spec"]["template"]["spec"])
            container = pod["containers"][0]
            check(container["image"] == image, f"{stage.stem}: {kind}'s image is {container['image']}")
            env = {e["name"]: e.get("value") for e in container.get("env", [])}
            if kind != "Job":
                check(env.get("PUSH_ENVIRONMENT") == expected["PUSH_ENVIRONMENT"] == stage.stem.upper(),
                      f"{stage.stem}: {kind}'s PUSH_ENVIRONMENT is {env.get('PUSH_ENVIRONMENT')}")
                check(env.get("METRICS_NAMESPACE") == expected["METRICS_NAMESPACE"],
                      f"{stage.stem}: {kind}'s METRICS_NAMESPACE is {env.get('METRICS_NAMESPACE')}")
            if kind == "Service":
                check_service(document, f"the {stage.stem} stage's Service")
                check(env.get("SUPABASE_JWKS_URL") == project + "/auth/v1/.well-known/jwks.json"
                      and env.get("SUPABASE_JWT_ISSUER") == project + "/auth/v1",
                      f"{stage.stem}: the Supabase URLs are {env.get('SUPABASE_JWKS_URL')}, "
                      f"{env.get('SUPABASE_JWT_ISSUER')}")

    # The documented commands, as a team copies them.
    docs = (ROOT / "docs" / "deploy.md").read_text()
    job = yaml.safe_load((KNATIVE / "migrate-job.yaml").read_text())
    deadline = job["spec"]["activeDeadlineSeconds"]
    block = re.search(r"<a id=\"knative-commands\"></a>\s*```sh\n(.*?)```", docs, re.S)
    check(block is not None, "docs/deploy.md has no Knative command block (anchor knative-commands)")
    if block:
        lines = [l.strip() for l in block.group(1).replace("\\\n", " ").splitlines() if l.strip()
                 and not l.strip().startswith("#")]
        order = {}
        for index, line in enumerate(lines):
            words = shlex.split(line, comments=True)
            if words[:2] == ["python3", "infra/knative/render.py"]:
                order.setdefault("render", index)
            if "delete" in words and "job" in words and "caregiver-push-migrate" in words:
                check("--ignore-not-found" in words, "the documented Job deletion fails on a first deploy")
                order.setdefault("delete", index)
            if words[:2] == ["kubectl", "apply"] and "app.kubernetes.io/component=migration" in words:
                order.setdefault("migrate", index)
            if words[:1] == ["kubectl"] and "wait" in words:
                timeout = next((w.split("=", 1)[1] for w in words if w.startswith("--timeout=")), "30s")
                seconds = int(timeout.rstrip("s")) if timeout.rstrip("s").isdigit() else 0
                check(seconds > deadline, f"kubectl wait gives up after {timeout}, before the Job's {deadline} s")
                check("job/caregiver-push-migrate" in words, "kubectl wait does not wait for the migration Job")
                order.setdefault("wait", index)
            if words[:2] == ["kubectl", "apply"] and "app.kubernetes.io/component!=migration" in words:
                order.setdefault("rest", index)
            if "kubectl" in words and "create" in words and "secret" in words:
                check("-n" in words or "--namespace" in words, f"a Secret is created outside the stage's namespace")
                order.setdefault("secrets", index)
        steps = ["secrets", "render", "delete", "migrate", "wait", "rest"]
        check(all(s in order for s in steps) and [order[s] for s in steps] == sorted(order[s] for s in steps),
              f"the documented Knative steps are not in the order {steps}: {order}")
    image_script = (ROOT / "scripts" / "image.sh").read_text()
    driver = re.search(r"STORAGE_DRIVER=\$\{STORAGE_DRIVER:-(\w+)\}", image_script).group(1)
    shell = "\n".join(re.findall(r"```sh\n(.*?)```", docs, re.S))
    pushes = [l for l in shell.splitlines() if re.search(r"\bbuildah (push|images)\b", l)]
    check(pushes, "docs/deploy.md does not say how to push the image")
    for line in pushes:
        check(f"STORAGE_DRIVER={driver}" in line, f"`{line.strip()}` looks for the image outside the {driver} "
                                                   "storage make image builds in")

    return report("knative")


if __name__ == "__main__":
    sys.exit(main())

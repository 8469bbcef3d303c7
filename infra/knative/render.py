#!/usr/bin/env python3
"""Prints the Kubernetes manifests of one stage: infra/knative/{migrate-job,service,push-sweep-cronjob}.yaml with the
stage's values (infra/knative/stages/<stage>.env, the one place for them) where the manifests hold placeholders.

    python3 infra/knative/render.py prod > caregiver-push-prod.yaml      # or a path to a stage file

Refuses (exit 1, naming the setting) a stage that still holds a placeholder or a value Kubernetes or the functions
would refuse later, so that a copied command cannot deploy `registry.example.com` or a Supabase project that does not
exist. Standard library only: any python3 renders. Tests/Contract/check_knative.py runs it as documented.
"""
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
MANIFESTS = ["migrate-job.yaml", "service.yaml", "push-sweep-cronjob.yaml"]
# Setting -> (what a valid value looks like, what it means).
SETTINGS = {
    "NAMESPACE": (r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", "a Kubernetes namespace name"),
    "IMAGE": (r"[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+@sha256:[0-9a-f]{64}", "an image reference pinned by digest"),
    "SUPABASE_URL": (r"https://[A-Za-z0-9.-]+(:[0-9]+)?", "the project's https://<project-ref>.supabase.co"),
    "PUSH_ENVIRONMENT": (r"DEV|PROD", "DEV or PROD"),
    "METRICS_NAMESPACE": (r"[A-Za-z0-9._/#:-]{1,255}", "a CloudWatch namespace"),
}
PLACEHOLDERS = ["registry.example.com", "sha256:" + "0" * 64, "YOUR-"]
# Placeholder in the manifests -> (the setting that replaces it, how many times each manifest holds it).
SUBSTITUTIONS = [
    (re.compile(r"^(  namespace: )caregiver-push$", re.M), "NAMESPACE", {"migrate-job.yaml": 1, "service.yaml": 1,
                                                                          "push-sweep-cronjob.yaml": 1}),
    (re.compile(r"^(\s+image: )caregiver-push$", re.M), "IMAGE", {"migrate-job.yaml": 1, "service.yaml": 1,
                                                                   "push-sweep-cronjob.yaml": 1}),
    (re.compile(r"(value: )https://YOUR-PROJECT\.supabase\.co(?=/auth/v1)"), "SUPABASE_URL", {"service.yaml": 2}),
    (re.compile(r"(value: )CaregiverPush/SET-BY-STAGE$", re.M), "METRICS_NAMESPACE", {"service.yaml": 1,
                                                                                     "push-sweep-cronjob.yaml": 1}),
    (re.compile(r"(value: )SET-BY-STAGE$", re.M), "PUSH_ENVIRONMENT", {"service.yaml": 1,
                                                                       "push-sweep-cronjob.yaml": 1}),
]


def fail(message):
    print(f"render: {message}", file=sys.stderr)
    sys.exit(1)


def read_stage(argument):
    path = pathlib.Path(argument)
    if not path.suffix and "/" not in argument:
        path = HERE / "stages" / f"{argument}.env"
    if not path.is_file():
        fail(f"no stage file {path} (the stages: {', '.join(sorted(p.stem for p in (HERE / 'stages').glob('*.env')))})")
    values = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or key not in SETTINGS:
            fail(f"{path}:{number}: not one of {', '.join(SETTINGS)}=VALUE")
        values[key] = value.strip()
    problems = [f"{key} is missing" for key in SETTINGS if key not in values]
    for key, value in values.items():
        pattern, meaning = SETTINGS[key]
        if any(placeholder in value for placeholder in PLACEHOLDERS):
            problems.append(f"{key} is still the placeholder {value!r}: set {meaning}")
        elif not re.fullmatch(pattern, value):
            problems.append(f"{key}={value!r} is not {meaning}")
    if problems:
        fail(f"{path}: " + "; ".join(problems))
    return values


def main():
    if len(sys.argv) != 2:
        fail("usage: render.py STAGE (a name under infra/knative/stages, or a path to a stage file)")
    values = read_stage(sys.argv[1])
    documents = []
    for name in MANIFESTS:
        text = (HERE / name).read_text()
        for pattern, key, counts in SUBSTITUTIONS:
            text, count = pattern.subn(lambda m: m.group(1) + values[key], text)
            if count != counts.get(name, 0):
                fail(f"{name} holds {count} placeholder(s) for {key}, not {counts.get(name, 0)}: update render.py")
        body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        left = [word for word in ("SET-BY-STAGE", "YOUR-PROJECT") if word in body]
        if left or re.search(r"^\s+image: caregiver-push$", body, re.M):
            fail(f"{name} keeps a placeholder ({', '.join(left) or 'image'}): update render.py")
        documents.append(f"# From infra/knative/{name}\n" + text.strip() + "\n")
    sys.stdout.write("---\n".join(documents))


if __name__ == "__main__":
    main()

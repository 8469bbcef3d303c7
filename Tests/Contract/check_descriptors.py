"""The deployment descriptors must say what the code reads: the next drift fails here instead of in a deploy.

Held against each other:
- the environment variables the functions read (found in the code that reads them: Configuration, the runtime
  secrets, the function runtime, logging, migrations, the trust store) — each is a SAM parameter with the code's own
  default (or a secret's ARN, or Lambda's logging controls), and an env entry of the Knative Service, unless it is
  in FIXED below with the reason, which docs/deploy.md must also state;
- infra/functions.json (memoryMB, timeoutSeconds, concurrency, schedule; extra members are tolerated) against the SAM
  functions' MemorySize, Timeout, ReservedConcurrentExecutions and Schedule, and against the Knative Service's
  containerConcurrency and timeoutSeconds and the push-sweep CronJob;
- each function's secrets: the *_SECRET_ARN variables it gets and the secrets its IAM policy may read are the same;
- infra/docker/Dockerfile against Package.swift: it copies only the staged context (no source folder of the
  manifest), and the image holds every function product (scripts/image.sh stages the manifest's list) plus what the
  entrypoint, the migration Job and the CronJob run;
- the Knative security context, probes and the migration Job.

Also prints each function's environment size as the SAM template deploys it (bytes of names and values), for this
template and, with --before OLD_TEMPLATE, for an older one with its deploy-time secrets resolved. Exits non-zero on
any difference, naming it, and prints the `N passed, N failed` line the CI reads.
"""
import glob
import json
import pathlib
import re
import subprocess
import sys
import tempfile

import yaml

from contract_checks import check, report


class _Tags(yaml.SafeLoader):
    """CloudFormation's short-form intrinsics as one-member maps: `!Ref X` → {"!Ref": "X"}, `!If [c, a, b]` →
    {"!If": [c, a, b]}, so that conditional values and ARNs can be followed."""


def _tag(loader, suffix, node):
    if isinstance(node, yaml.ScalarNode):
        return {"!" + suffix: loader.construct_scalar(node)}
    if isinstance(node, yaml.SequenceNode):
        return {"!" + suffix: loader.construct_sequence(node, deep=True)}
    return {"!" + suffix: loader.construct_mapping(node, deep=True)}


_Tags.add_multi_constructor("!", _tag)

# Read by the code, deliberately not a deploy setting: variable -> why.
FIXED = {
    "AWS_LAMBDA_RUNTIME_API": "set by Lambda (and by the runner for its warm workers)",
    "AWS_SESSION_TOKEN": "set by Lambda; the Parameters and Secrets extension's request token",
    "AWS_LAMBDA_LOG_STREAM_NAME": "set by Lambda",
    "LAMBDA_TASK_ROOT": "set by Lambda (/var/task, where the zip is unpacked)",
    "AWS_LAMBDA_LOG_FORMAT": "set by Lambda from LoggingConfig.LogFormat (the template sets JSON)",
    "AWS_LAMBDA_LOG_LEVEL": "set by Lambda from LoggingConfig.ApplicationLogLevel (the template's LogLevel)",
    "PARAMETERS_SECRETS_EXTENSION_HTTP_PORT": "the extension's own setting; its default 2773 is the code's",
    "MIGRATIONS_DIR": "the image sets it; on Lambda db-migrate finds migrations/ in its zip",
    "FCM_API_BASE_URL": "tests and the emulator only; production is always https://fcm.googleapis.com",
    "FCM_SERVICE_ACCOUNT_FILE": "the runner's and local development's; deployments pass the key as a secret",
    "SSL_CERT_FILE": "the image sets it to its bundle; on Lambda the system store of provided.al2023",
    "SSL_CERT_DIR": "as SSL_CERT_FILE",
}
# Deployed on purpose with another value than the code's default: variable -> (the deployments' value, why). The
# code's default serves a run by hand or in CI (`echo '{}' | push-sweep` makes one pass); each deployment's schedule
# keeps one sweep always there (docs/behaviour.md#sweep).
SCHEDULED = {
    "PUSH_SWEEP_STAY": ("on", "each scheduled run stays, sending retries as they fall due"),
    "PUSH_SWEEP_TIME_LIMIT_MS": ("70000", "70 s: each minute's run overlaps the next one's start"),
    "PUSH_FIRST_SEND": ("sweep", "the staying sweep sends what recordings queue, a batch per lease"),
}
# The secrets: on Lambda the ARN variable, on Knative the variable it supplies (from a Kubernetes Secret).
SECRET_ARNS = {
    "DATABASE_SECRET_ARN": ("DATABASE_URL", "DatabaseSecretArn"),
    "SUPABASE_JWT_SECRET_ARN": ("SUPABASE_JWT_SECRET", "SupabaseJwtSecretArn"),
    "FCM_SERVICE_ACCOUNT_SECRET_ARN": ("FCM_SERVICE_ACCOUNT_JSON", "FcmServiceAccountSecretArn"),
    # db-migrate only: the runtime role's secret (the functions' DatabaseSecretArn), whose password becomes the role's
    # login right after migrating, before any function takes traffic (docs/deploy.md#roles).
    "RUNTIME_DATABASE_SECRET_ARN": ("RUNTIME_DATABASE_URL", "DatabaseSecretArn"),
    # The HTTP functions, with the edge on: the header CloudFront adds (a secret the stack generates).
    "EDGE_ORIGIN_SECRET_ARN": ("EDGE_ORIGIN_SECRET", "EdgeOriginSecret"),
}
# Read by the migrator alone: never a Service or CronJob setting. On Knative the Job reads the runtime connection from
# a file (RUNTIME_DATABASE_URL_FILE, gateway migrate), the runtime Secret's database-url key mounted alone.
MIGRATOR_ONLY = {"RUNTIME_DATABASE_SECRET_ARN", "RUNTIME_DATABASE_URL"}
# The two database connections (docs/deploy.md#roles): db-migrate connects as the schema's owner, every other
# function as the runtime role; neither may read the other's secret.
MIGRATOR_DATABASE_PARAMETER = "MigratorDatabaseSecretArn"


def secret_parameter(function, variable):
    """The template parameter whose secret `function` reads through `variable`."""
    if function == "db-migrate" and variable == "DATABASE_SECRET_ARN":
        return MIGRATOR_DATABASE_PARAMETER
    return SECRET_ARNS[variable][1]


# Only meaningful on Lambda (with *_SECRET_ARN variables): not a Knative setting.
# The edge's header: CloudFront in front of the HTTP API is the SAM stack's (docs/deploy.md#the-edge).
LAMBDA_ONLY = {"SECRETS_REFRESH_SECONDS", "EDGE_ORIGIN_SECRET", "EDGE_ORIGIN_SECRET_ARN"}
# Read by libpq itself, not by our code: the template sets them for verify-full (docs/deploy.md).
LIBPQ = {"PGSSLMODE", "PGSSLROOTCERT"}
CODE_FILES = [
    "Shared/CaregiverPush/Config/Configuration.swift",
    "Shared/CaregiverPush/Config/RuntimeSecrets.swift",
    "Shared/Platform/FunctionRuntime/FunctionHost.swift",
    "Shared/Platform/FunctionRuntime/Logging/LogFormat.swift",
    "Shared/Platform/FunctionRuntime/Secrets/SecretsExtension.swift",
    "Shared/CaregiverPush/Deploy/MigrationsCustomResource.swift",
    "Shared/Migrations/RuntimeLogin.swift",
    "Shared/Platform/Curl/TrustStore.swift",
]



def code_variables():
    """Variable -> the code's default as text ('' when it has none), from the places that read variables."""
    text = "\n".join(open(path).read() for path in CODE_FILES)
    name = r'"([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)"'
    found = {}
    for pattern in [r"value\(" + name, r"environment\(" + name, r"environment\[" + name + r"\]",
                    r"integer\(\s*" + name, r"\(\s*" + name + r",\s*(?:\d|\")"]:
        for match in re.finditer(pattern, text):
            found.setdefault(match.group(1), "")
    for match in re.finditer(r'integer\(\s*"(\w+)", default: ([\d_]+)', text):
        found[match.group(1)] = match.group(2).replace("_", "")
    # A default named by a constant (`default: PushDeviceRegistry.defaultDeviceCap`): that constant's literal, read
    # from the domain's sources, so the template cannot drift from it either.
    sources = "\n".join(open(path).read() for path in glob.glob("Shared/**/*.swift", recursive=True))
    for match in re.finditer(r'integer\(\s*"(\w+)", default: (\w+)\.(\w+)', text):
        constant = re.search(r"static let " + match.group(3) + r"(?::\s*Int)? = ([\d_]+)", sources)
        found[match.group(1)] = constant.group(1).replace("_", "") if constant else "?"
    for match in re.finditer(r'\("(\w+)", (\d[\d_]*)\)', text):
        found[match.group(1)] = match.group(2).replace("_", "")
    for match in re.finditer(r'value\("(\w+)"\) \?\? "([^"]*)"', text):
        found[match.group(1)] = match.group(2)
    # A choice whose absence means one of its values: `switch value("X") { case nil, "off": …`.
    for match in re.finditer(r'switch value\("(\w+)"\) \{\s*case nil, "([^"]*)"', text):
        found[match.group(1)] = match.group(2)
    refresh = re.search(r'"SECRETS_REFRESH_SECONDS"[\s\S]*?seconds \?\? (\d+)', text)
    if refresh:
        found["SECRETS_REFRESH_SECONDS"] = refresh.group(1)
    log_level = re.search(r'environment\["LOG_LEVEL"\][^\n]*\?\? \.(\w+)', text)
    if log_level:
        found["LOG_LEVEL"] = log_level.group(1)
    return found


def sam_functions(sam):
    """Function name (its zip) -> its resource properties."""
    out = {}
    for logical_id, resource in sam["Resources"].items():
        if resource.get("Type") == "AWS::Serverless::Function":
            name = str(resource["Properties"]["CodeUri"]).rsplit("/", 1)[-1].removesuffix(".zip")
            out[name] = (logical_id, resource["Properties"])
    return out


def ref(value):
    return value.get("!Ref") if isinstance(value, dict) else None


def main():
    table = json.load(open("infra/functions.json"))["functions"]
    sam = yaml.load(open("infra/aws/template.yaml"), Loader=_Tags)
    service = yaml.safe_load(open("infra/knative/service.yaml"))
    job = yaml.safe_load(open("infra/knative/migrate-job.yaml"))
    cron = yaml.safe_load(open("infra/knative/push-sweep-cronjob.yaml"))
    docs = open("docs/deploy.md").read()
    variables = code_variables()
    parameters = sam["Parameters"]
    globals_ = sam["Globals"]["Function"]
    global_env = globals_["Environment"]["Variables"]
    functions = sam_functions(sam)

    # Every variable the code reads: deployable, or fixed on purpose and documented.
    for variable in sorted(variables):
        if variable in FIXED:
            check(f"`{variable}`" in docs, f"docs/deploy.md does not say why {variable} is fixed ({FIXED[variable]})")
            continue
        default = variables[variable]
        if variable in SECRET_ARNS:
            supplied, parameter = SECRET_ARNS[variable]
            users = [n for n, (_, p) in functions.items() if variable in p.get("Environment", {}).get("Variables", {})]
            check(users, f"no SAM function gets {variable}")
            if variable in MIGRATOR_ONLY:
                check(users == ["db-migrate"], f"{variable} goes to {users}, not db-migrate alone")
            for name in users:
                value = functions[name][1]["Environment"]["Variables"][variable]
                expected = secret_parameter(name, variable)
                if variable == "EDGE_ORIGIN_SECRET_ARN":
                    choice = value.get("!If", []) if isinstance(value, dict) else []
                    check(len(choice) == 3 and choice[0] == "EdgeOn" and ref(choice[2]) == "AWS::NoValue",
                          f"{name}: {variable} is not set exactly when the edge is on")
                    value = choice[1] if len(choice) == 3 else value
                check(ref(value) == expected, f"{name}: {variable} is not !Ref {expected}")
            if variable == "EDGE_ORIGIN_SECRET_ARN":
                routed = sorted(n for n, (_, p) in functions.items()
                                if any(e.get("Type") == "HttpApi" for e in p.get("Events", {}).values()))
                check(sorted(users) == routed, f"{variable} goes to {sorted(users)}, not every routed function {routed}")
            check(supplied not in global_env, f"the template's Globals set {supplied} itself: a deploy-time secret")
            continue
        if variable in SECRET_ARNS_SUPPLIED:
            continue  # checked through its ARN variable on Lambda; Knative below
        if variable == "LOG_LEVEL":
            logging = globals_.get("LoggingConfig", {})
            check(logging.get("LogFormat") == "JSON", "Globals.LoggingConfig.LogFormat is not JSON")
            level = parameters.get(ref(logging.get("ApplicationLogLevel")) or "", {})
            check(str(level.get("Default", "")).upper() == default.upper(),
                  f"LogLevel's default {level.get('Default')!r} is not the code's {default!r}")
            continue
        value = global_env.get(variable)
        check(value is not None, f"{variable} is read by the code but the SAM template cannot set it")
        if value is None:
            continue
        if variable == "METRICS_NAMESPACE":
            text = str(value.get("!Sub", "")) if isinstance(value, dict) else ""
            check(text.startswith(default) and "${Stage}" in text,
                  f"METRICS_NAMESPACE is not the code's {default!r} with the stage: {value}")
            continue
        parameter = parameters.get(ref(value) or "")
        check(parameter is not None, f"{variable} is not !Ref of a parameter")
        if variable in SCHEDULED:
            default = SCHEDULED[variable][0]
        if parameter is not None:
            check(str(parameter.get("Default", "")) == default,
                  f"parameter {ref(value)} defaults to {parameter.get('Default')!r}, the code to {default!r}")
    for variable in global_env:
        check(variable in variables or variable in LIBPQ, f"the template sets {variable}, which nothing reads")
    check(any(parameters.get(p, {}).get("Default") == "" for p in ["SupabaseJwksUrl"]),
          "SupabaseJwksUrl is not a parameter")
    check("SupabaseJwksUrl" in json.dumps(sam["Rules"], default=str), "the key rule does not accept SupabaseJwksUrl")

    # The function table against the SAM functions, both ways.
    extra = set(functions) - {f["name"] for f in table}
    check(not extra, f"SAM functions {sorted(extra)} are not in infra/functions.json")
    for entry in table:
        name = entry["name"]
        check(name in functions, f"{name} of infra/functions.json is not a SAM function")
        if name not in functions:
            continue
        properties = functions[name][1]
        check(properties.get("MemorySize", globals_.get("MemorySize")) == entry["memoryMB"],
              f"{name}: MemorySize is not memoryMB {entry['memoryMB']}")
        check(properties.get("Timeout", globals_.get("Timeout")) == entry["timeoutSeconds"],
              f"{name}: Timeout is not timeoutSeconds {entry['timeoutSeconds']}")
        check(properties.get("ReservedConcurrentExecutions") == entry["concurrency"],
              f"{name}: ReservedConcurrentExecutions is not concurrency {entry['concurrency']}")
        schedules = [e["Properties"]["Schedule"] for e in properties.get("Events", {}).values()
                     if e["Type"] == "Schedule"]
        check(schedules == ([entry["schedule"]] if "schedule" in entry else []),
              f"{name}: schedule {schedules} is not {entry.get('schedule')}")
    api = next(r for r in sam["Resources"].values() if r.get("Type") == "AWS::Serverless::HttpApi")
    route = api["Properties"].get("DefaultRouteSettings", {})
    check("ThrottlingBurstLimit" in route and "ThrottlingRateLimit" in route, "the HTTP API has no default throttling")
    # Access logging on, in a form that cannot log a token or a body: only $context variables of this list (no
    # $request.header/body/querystring, no authorizer claims, no $input), and the line is JSON.
    access = api["Properties"].get("AccessLogSettings", {})
    check(access.get("DestinationArn") and access.get("Format"), "the HTTP API's access logging is off")
    access_format = str(access.get("Format", ""))
    logged = set(re.findall(r"\$[A-Za-z][\w.]*", access_format))
    allowed = {"$context.requestId", "$context.requestTime", "$context.identity.sourceIp", "$context.httpMethod",
               "$context.routeKey", "$context.status", "$context.responseLength", "$context.responseLatency",
               "$context.integrationLatency", "$context.integrationStatus", "$context.error.message"}
    check(logged and logged <= allowed, f"the access log names {sorted(logged - allowed)}, which may carry a token, "
                                        "a body or a query string")
    try:
        json.loads(access_format)
    except ValueError:
        check(False, "the access log format is not one JSON line")

    # Each function's secrets: the ARNs it gets are exactly the ones its policy may read.
    for name, (logical_id, properties) in functions.items():
        arns = {v: secret_parameter(name, v) for v in SECRET_ARNS
                if v in properties.get("Environment", {}).get("Variables", {})}
        resources = set()
        for policy in properties.get("Policies", []):
            for statement in policy.get("Statement", []):
                if "secretsmanager:GetSecretValue" in json.dumps(statement.get("Action")):
                    for resource in statement["Resource"]:
                        if isinstance(resource, dict) and "!If" in resource:
                            resource = resource["!If"][1]  # the ARN when its secret is given
                        if ref(resource):
                            resources.add(ref(resource))
        check(resources == set(arns.values()),
              f"{name}: reads secrets {sorted(arns.values())} but its policy grants {sorted(resources)}")
    check("SUPABASE_JWT_SECRET_ARN" not in functions["db-migrate"][1]["Environment"]["Variables"]
          and "FCM_SERVICE_ACCOUNT_SECRET_ARN" not in functions["db-migrate"][1]["Environment"]["Variables"],
          "db-migrate gets more than the database secret")

    check(MIGRATOR_DATABASE_PARAMETER in parameters, f"the template has no {MIGRATOR_DATABASE_PARAMETER} parameter")
    owner_pattern = parameters.get(MIGRATOR_DATABASE_PARAMETER, {}).get("AllowedPattern", ".*")
    check(re.fullmatch(owner_pattern, "arn:aws:secretsmanager:eu-west-1:123456789012:secret:caregiver-push/db-AbCdEf")
          and not re.fullmatch(owner_pattern, "arn:aws:secretsmanager:eu-west-1:123456789012:secret:*")
          and not re.fullmatch(owner_pattern, "arn:aws:secretsmanager:*:*:secret:caregiver-push/db-AbCdEf"),
          f"{MIGRATOR_DATABASE_PARAMETER}'s pattern admits a wildcard ARN, or refuses a real one")
    owner_readers = [n for n, (_, p) in functions.items() if MIGRATOR_DATABASE_PARAMETER in json.dumps(p, default=str)]
    check(owner_readers == ["db-migrate"], f"the owner's secret is read by {owner_readers}, not db-migrate alone")

    # docs/deploy.md's `sam deploy` as a team copies it: every override is a parameter of the template, every parameter
    # without a default is given, and each value fits its parameter (AllowedPattern, AllowedValues), with the
    # documented `<placeholder>`s filled in by digits. And the concurrency quota the account needs, as documented.
    deploy = re.search(r"sam deploy --template-file infra/aws/template.yaml [\s\S]*?--parameter-overrides ([\s\S]*?)\n```", docs)
    check(deploy, "docs/deploy.md has no `sam deploy … --parameter-overrides` command")
    if deploy:
        overrides = dict(word.split("=", 1) for word in deploy.group(1).replace("\\\n", " ").split() if "=" in word)
        unknown = set(overrides) - set(parameters)
        check(not unknown, f"the documented sam deploy sets {sorted(unknown)}, which the template does not have")
        required = {name for name, p in parameters.items() if "Default" not in p}
        check(required <= set(overrides), f"the documented sam deploy leaves out {sorted(required - set(overrides))}")
        for name, value in overrides.items():
            parameter = parameters.get(name, {})
            if "AllowedPattern" in parameter:
                pattern = parameter["AllowedPattern"].removeprefix("^").removesuffix("$")
                # `<account>`: any account the pattern names (AWS's own, for the extension layer), else any account.
                accounts = re.findall(r"\d{12}", pattern) or ["123456789012"]
                fills = [re.sub(r"<[a-z-]+>", "1", value.replace("<account>", account)) for account in accounts]
                check(any(re.fullmatch(pattern, filled) for filled in fills),
                      f"the documented {name}={value} does not match the template's pattern")
            if "AllowedValues" in parameter:
                check(value in parameter["AllowedValues"], f"the documented {name}={value} is not allowed")
    reserved = sum(f["concurrency"] for f in table)
    check(f"— {reserved} —" in docs and f"at least {reserved + 100} per region" in docs,
          f"docs/deploy.md does not say the template reserves {reserved} and the account needs {reserved + 100}")

    # Knative: every deployable variable an env entry; the table's limits; probes; security.
    spec = service["spec"]["template"]["spec"]
    container = spec["containers"][0]
    knative_env = {e["name"]: e for e in container["env"]}
    for variable, default in sorted(variables.items()):
        if variable in FIXED or variable in SECRET_ARNS or variable in LAMBDA_ONLY:
            continue
        if variable in MIGRATOR_ONLY:
            check(variable not in knative_env, f"infra/knative/service.yaml sets {variable}, the migrator's alone")
            continue
        check(variable in knative_env, f"infra/knative/service.yaml cannot set {variable}")
        entry = knative_env.get(variable, {})
        if variable in SCHEDULED:
            default = SCHEDULED[variable][0]
        if "value" in entry and default and variable not in ("METRICS_NAMESPACE", "LOG_LEVEL"):
            check(str(entry["value"]) == default, f"Knative's {variable}={entry['value']} is not the code's {default}")
    routed = [f for f in table if "path" in f]
    check(spec["containerConcurrency"] == sum(f["concurrency"] for f in routed),
          "containerConcurrency is not the routed functions' total concurrency")
    check(spec["timeoutSeconds"] >= max(f["timeoutSeconds"] for f in routed),
          "the Knative timeout is shorter than a routed function's")
    check(container["readinessProbe"]["httpGet"]["path"] == "/readyz", "the readiness probe is not GET /readyz")
    check(container["livenessProbe"]["httpGet"]["path"] == "/healthz", "the liveness probe is not GET /healthz")
    for what, pod, box in [("service", spec, container), ("migration job", job["spec"]["template"]["spec"],
                                                          job["spec"]["template"]["spec"]["containers"][0]),
                           ("cronjob", cron["spec"]["jobTemplate"]["spec"]["template"]["spec"],
                            cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0])]:
        security = box.get("securityContext", {})
        check(security.get("runAsNonRoot") is True or pod.get("securityContext", {}).get("runAsNonRoot") is True,
              f"{what}: runAsNonRoot is not set")
        check(security.get("allowPrivilegeEscalation") is False, f"{what}: privilege escalation is allowed")
        check(security.get("readOnlyRootFilesystem") is True, f"{what}: the root file system is writable")
        check(security.get("capabilities", {}).get("drop") == ["ALL"], f"{what}: capabilities are not all dropped")
    # The two database connections: the migration Job's from a Secret the Service and the sweep never name.
    def secret_names(pod):
        return {ref["secretKeyRef"]["name"] for c in pod["containers"] for e in c.get("env", [])
                for ref in [e.get("valueFrom", {})] if "secretKeyRef" in ref} | {
                v["secret"]["secretName"] for v in pod.get("volumes", []) if "secret" in v}

    def database_secret(pod):
        return next(e["valueFrom"]["secretKeyRef"]["name"] for e in pod["containers"][0]["env"]
                    if e["name"] == "DATABASE_URL")
    job_pod = job["spec"]["template"]["spec"]
    cron_pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    owner_secret = database_secret(job_pod)
    check(owner_secret != database_secret(spec) and database_secret(spec) == database_secret(cron_pod),
          "the migration Job's database secret is the Service's or the sweep's")
    check(owner_secret not in secret_names(spec) | secret_names(cron_pod),
          f"the Service or the sweep names the migrator's Secret {owner_secret}")
    check_runtime_login(job_pod, spec, cron_pod, database_secret(spec), functions, sam["Resources"])
    sweep = next(f for f in table if f["name"] == "push-sweep")
    cron_job = cron["spec"]["jobTemplate"]["spec"]
    check(cron_job["activeDeadlineSeconds"] == sweep["timeoutSeconds"], "the CronJob's deadline is not push-sweep's")
    check(sweep["schedule"] == "rate(1 minute)" and cron["spec"]["schedule"] == "* * * * *",
          "the CronJob's schedule is not push-sweep's")
    # A staying sweep outlasts the minute, ends before its timeout, and the next run may start meanwhile.
    limit = int(SCHEDULED["PUSH_SWEEP_TIME_LIMIT_MS"][0])
    check(60_000 < limit < (sweep["timeoutSeconds"] - 2) * 1000,
          f"PUSH_SWEEP_TIME_LIMIT_MS {limit} does not outlast the minute within push-sweep's timeout")
    check(cron["spec"].get("concurrencyPolicy") == "Allow", "the CronJob forbids the overlap a staying sweep needs")

    # The Dockerfile against the manifest: staged artifacts only, and every function in the image.
    dockerfile = open("infra/docker/Dockerfile").read()
    manifest = open("Package.swift").read()
    source_folders = {p.split("/")[0] for p in re.findall(r'path: "([^"]+)"', manifest)} | {"Functions"}
    copies = re.findall(r"^COPY (?:--\S+ )*(\S+) ", dockerfile, re.M)
    check(copies == ["app/"], f"the Dockerfile copies {copies}, not only the staged app/")
    check(not any(re.search(rf"\b{folder}\b/", line) for line in dockerfile.splitlines() if line.startswith("COPY")
                  for folder in source_folders), "the Dockerfile copies a source folder")
    check(re.search(r"^ARG BASE=", dockerfile, re.M) and re.search(r"^FROM \$\{BASE\}", dockerfile, re.M),
          "the Dockerfile's base is not the BASE build argument")
    check(re.search(r"^USER (?!0|root)\d+", dockerfile, re.M), "the image does not run as a numeric non-root user")
    # The default base is a point release (optionally by digest), never `latest` or a codename that moves.
    base = re.search(r"^ARG BASE=(\S+)", dockerfile, re.M)
    check(base and re.fullmatch(r"debian:\d+\.\d+-slim(@sha256:[0-9a-f]{64})?", base.group(1)),
          f"the Dockerfile's default base {base.group(1) if base else None} is not a pinned Debian point release")
    products = re.findall(r'\("([a-z-]+)", "[A-Za-z]+"\)', manifest)
    image_script = open("scripts/image.sh").read()
    staged = subprocess.run(
        ["python3", "-c", re.search(r"python3 -c '(.*?)'\)\)", image_script).group(1)],
        capture_output=True, text=True).stdout.split()
    table_names = [f["name"] for f in table]
    check(staged == table_names, f"scripts/image.sh stages {staged}, infra/functions.json has {table_names}")
    check(set(table_names) <= set(products), "a function of the table is not a product of Package.swift")
    check("db-migrate" in staged and "push-sweep" in staged, "the image lacks db-migrate or push-sweep")
    run_in_image = re.findall(r"/app/bin/([a-z-]+)", dockerfile + json.dumps(job) + json.dumps(cron))
    check(set(run_in_image) <= set(table_names) | {"gateway"}, f"the image is asked to run {set(run_in_image)}")
    # The image ships the production gateway and nothing of the developer's tools (`runner`: dev stack, seed data,
    # token minting, emulators).
    built = re.findall(r"--product (\S+)", image_script)
    check(built == ["gateway"], f"scripts/image.sh builds {built}, not only the gateway")
    installed = set(re.findall(r'"\$context/app/bin/([a-z-]+)"', image_script)) - {"lib"}
    check(installed == {"gateway"}, f"scripts/image.sh installs {installed} besides the functions, not only the gateway")
    staged_bin = pathlib.Path(".build/image/context/app/bin")
    if staged_bin.is_dir():
        check(not (staged_bin / "runner").exists(), f"the staged image context has a runner: {staged_bin / 'runner'}")
        check((staged_bin / "gateway").is_file(), f"the staged image context has no gateway in {staged_bin}")
    check("--max-body 16384" in dockerfile, "the entrypoint does not bound request bodies to the functions' 16 KiB")

    check_operator_inputs(parameters)
    check_edge(sam, parameters)

    lines, now = env_size_report()
    for line in lines:
        print(line)
    # deploy.md's table of environment sizes says what this computes (the "now" columns), for every function.
    documented = {}
    for row in re.findall(r"^\| ([a-z, -]+) \| \d+ \| \d+[^|]* \| (\d+) \| (\d+) \|$", docs, re.M):
        for name in row[0].split(", "):
            documented[name] = (int(row[1]), int(row[2]))
    computed = {name: (now[False][name], now[True][name]) for name in now[False]}
    check(documented == computed, f"docs/deploy.md's environment sizes {documented} are not the template's {computed}")
    return report("descriptors")


SECRET_ARNS_SUPPLIED = {supplied for supplied, _ in SECRET_ARNS.values()}


def check_runtime_login(job_pod, service_pod, cron_pod, runtime_secret, functions, resources):
    """The runtime role gets its login before traffic, on both paths (docs/deploy.md#roles), from the one runtime
    secret the functions use, and the migrator sees nothing of that secret but its connection string."""
    # AWS: db-migrate reads the functions' own database secret as RUNTIME_DATABASE_SECRET_ARN; the custom resource it
    # serves is what every other function DependsOn (check_routes.py), so none runs before the login.
    migrate_env = functions.get("db-migrate", (None, {}))[1].get("Environment", {}).get("Variables", {})
    runtime_refs = {ref(p.get("Environment", {}).get("Variables", {}).get("DATABASE_SECRET_ARN"))
                    for n, (_, p) in functions.items() if n != "db-migrate"}
    check(runtime_refs == {ref(migrate_env.get("RUNTIME_DATABASE_SECRET_ARN"))},
          f"db-migrate's RUNTIME_DATABASE_SECRET_ARN is not the functions' database secret {sorted(runtime_refs)}: "
          "the runtime role would get no login, or another password, before traffic")
    served = [name for name, r in resources.items() if r.get("Type") == "Custom::DatabaseMigrations"
              and "DbMigrateFunction" in json.dumps(r.get("Properties", {}).get("ServiceToken"), default=str)]
    check(served == ["DatabaseMigrations"], f"the migrations custom resource served by db-migrate is {served}")
    # A db-migrate that never answers (a silent network, a killed environment) must not leave CloudFormation
    # waiting its default hour: the resource gives up a minute after the function's own timeout, by which time the
    # function has answered FAILED itself whenever it could.
    migrate_timeout = functions.get("db-migrate", (None, {}))[1].get("Timeout")
    service_timeout = resources.get("DatabaseMigrations", {}).get("Properties", {}).get("ServiceTimeout")
    check(isinstance(migrate_timeout, int) and service_timeout == migrate_timeout + 60,
          f"the migrations custom resource's ServiceTimeout is {service_timeout}, not db-migrate's Timeout "
          f"{migrate_timeout} + 60 s (CloudFormation's default is an hour)")
    # Knative: the Job's RUNTIME_DATABASE_URL_FILE is the runtime Secret's database-url key, mounted alone.
    container = job_pod["containers"][0]
    env = {e["name"]: e for e in container.get("env", [])}
    path = env.get("RUNTIME_DATABASE_URL_FILE", {}).get("value", "")
    check(path, "the migration Job has no RUNTIME_DATABASE_URL_FILE: the runtime role never gets its login")
    volumes = {v["name"]: v for v in job_pod.get("volumes", [])}
    sources = []
    for mount in container.get("volumeMounts", []):
        secret = volumes.get(mount["name"], {}).get("secret")
        if secret and secret.get("secretName") == runtime_secret:
            items = secret.get("items")
            check(items is not None and [i["key"] for i in items] == ["database-url"],
                  f"the migration Job mounts {runtime_secret}'s keys {items}, not its database-url alone")
            check(not secret.get("optional"), f"the Job's {runtime_secret} volume is optional: a missing login "
                                              "would only show as the Service's 503s")
            sources += [mount["mountPath"].rstrip("/") + "/" + i["path"] for i in items or []]
    check(path in sources, f"RUNTIME_DATABASE_URL_FILE={path!r} is not {runtime_secret}'s database-url mounted in "
                           f"the Job ({sources})")
    check(not any(e.get("valueFrom", {}).get("secretKeyRef", {}).get("name") == runtime_secret
                  for e in container.get("env", [])),
          f"the migration Job takes a key of {runtime_secret} into its environment")
    for what, pod in [("Service", service_pod), ("CronJob", cron_pod)]:
        names = {e["name"] for c in pod["containers"] for e in c.get("env", [])}
        check(not names & (MIGRATOR_ONLY | {"RUNTIME_DATABASE_URL_FILE"}),
              f"the {what} sets {sorted(names & (MIGRATOR_ONLY | {'RUNTIME_DATABASE_URL_FILE'}))}")


def pattern_accepts(parameter, value):
    pattern = parameter.get("AllowedPattern")
    return pattern is not None and re.fullmatch(pattern, value) is not None


def check_operator_inputs(parameters):
    """Operator inputs that would widen trust: wildcard secret ARNs, a layer from anyone, an issuer left empty."""
    good = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:caregiver-push/database-AbCdEf"
    wildcards = ["arn:aws:secretsmanager:eu-west-1:123456789012:secret:*",
                 "arn:aws:secretsmanager:eu-west-1:123456789012:secret:caregiver-push/*",
                 "arn:aws:secretsmanager:eu-west-1:123456789012:secret:caregiver-push/database-AbCd?f",
                 "arn:aws:secretsmanager:*:*:secret:caregiver-push/database-AbCdEf",
                 "arn:aws:secretsmanager:eu-west-1:123456789012:secret:caregiver-push/database"]
    for _, name in SECRET_ARNS.values():
        if name == "EdgeOriginSecret":
            continue  # the stack's own secret, not an operator's input
        parameter = parameters.get(name, {})
        check(pattern_accepts(parameter, good), f"{name} refuses a secret's ARN: {parameter.get('AllowedPattern')}")
        for value in wildcards:
            check(not pattern_accepts(parameter, value), f"{name} accepts {value}, which IAM reads as a wildcard")
        optional = "Default" in parameter
        check(pattern_accepts(parameter, "") == optional,
              f"{name}: the empty value is {'refused' if optional else 'accepted'} ({'optional' if optional else 'required'})")
    layer = parameters.get("SecretsExtensionLayerArn", {})
    check(pattern_accepts(layer, "arn:aws:lambda:eu-west-1:015030872274:layer:AWS-Parameters-and-Secrets-Lambda-Extension:11"),
          "SecretsExtensionLayerArn refuses AWS's own layer in eu-west-1")
    for value in ["arn:aws:lambda:eu-west-1:123456789012:layer:AWS-Parameters-and-Secrets-Lambda-Extension:11",
                  "arn:aws:lambda:eu-west-1:015030872274:layer:something-else:1",
                  "arn:aws:lambda:eu-west-1:015030872274:layer:AWS-Parameters-and-Secrets-Lambda-Extension-Arm64:11"]:
        check(not pattern_accepts(layer, value), f"SecretsExtensionLayerArn accepts {value}: not AWS's x86_64 layer")
    issuer = parameters.get("SupabaseJwtIssuer", {})
    check("Default" not in issuer and not pattern_accepts(issuer, ""),
          "SupabaseJwtIssuer may be empty, which accepts a token of any issuer")
    check(pattern_accepts(issuer, "https://abcdefghijklmnop.supabase.co/auth/v1"),
          "SupabaseJwtIssuer refuses a Supabase project's issuer")


def check_edge(sam, parameters):
    """Per-client limits in front of the HTTP API (which cannot have WAF): on by default, a rate-based rule per IP."""
    resources = sam["Resources"]
    switch = parameters.get("EdgeRateLimiting", {})
    check(switch.get("Default") == "on" and set(switch.get("AllowedValues", [])) == {"on", "off"},
          "EdgeRateLimiting is not an on/off parameter that defaults to on")
    distribution = resources.get("EdgeDistribution", {})
    config = distribution.get("Properties", {}).get("DistributionConfig", {})
    check(distribution.get("Type") == "AWS::CloudFront::Distribution" and distribution.get("Condition") == "EdgeOn",
          "no CloudFront distribution under the EdgeOn condition")
    acl_choice = json.dumps(config.get("WebACLId"), default=str)
    check("EdgeWebAcl" in acl_choice and "EdgeWebAclArn" in acl_choice,
          f"the distribution's WebACLId is not the stack's web ACL or EdgeWebAclArn: {acl_choice}")
    origins = json.dumps(config.get("Origins"), default=str)
    check("${HttpApi}.execute-api" in origins, "the distribution's origin is not the HTTP API")
    check(config.get("DefaultCacheBehavior", {}).get("ViewerProtocolPolicy") == "https-only",
          "the distribution accepts plain HTTP")
    check("POST" in config.get("DefaultCacheBehavior", {}).get("AllowedMethods", []),
          "the distribution does not pass POST on")
    secret = resources.get("EdgeOriginSecret", {})
    check(secret.get("Type") == "AWS::SecretsManager::Secret" and secret.get("Condition") == "EdgeOn"
          and secret.get("Properties", {}).get("GenerateSecretString", {}).get("PasswordLength", 0) >= 32,
          "no generated EdgeOriginSecret (32 characters or more) under the EdgeOn condition")
    headers = [h for o in config.get("Origins", []) for h in o.get("OriginCustomHeaders", [])]
    check(any(h.get("HeaderName") == "x-origin-verify"
              and "{{resolve:secretsmanager:${EdgeOriginSecret}:SecretString}}" in json.dumps(h.get("HeaderValue"))
              for h in headers),
          "the distribution does not add x-origin-verify from EdgeOriginSecret to what it forwards")
    check("EdgeHasWebAcl" in sam.get("Rules", {}), "no rule demands EdgeWebAclArn outside us-east-1")
    check("AppBaseUrl" in sam.get("Outputs", {}), "no AppBaseUrl output for the app")

    def acl_properties(template, where):
        acl = template["Resources"].get("EdgeWebAcl", {})
        check(acl.get("Type") == "AWS::WAFv2::WebACL", f"{where}: no EdgeWebAcl web ACL")
        properties = acl.get("Properties", {})
        check(properties.get("Scope") == "CLOUDFRONT", f"{where}: the web ACL's scope is not CLOUDFRONT")
        rules = properties.get("Rules", [])
        limits = [r for r in rules if "RateBasedStatement" in r.get("Statement", {})]
        check(len(limits) == 1, f"{where}: not one rate-based rule")
        for rule in limits:
            statement = rule["Statement"]["RateBasedStatement"]
            check(statement.get("AggregateKeyType") == "IP", f"{where}: the rate is not counted per client IP")
            check(ref(statement.get("Limit")) == "EdgeRateLimitPerIp", f"{where}: the limit is not EdgeRateLimitPerIp")
            check(statement.get("EvaluationWindowSec") == 60, f"{where}: the window is not 60 s")
            block = rule.get("Action", {}).get("Block", {}).get("CustomResponse", {})
            check(block.get("ResponseCode") == 429, f"{where}: the rule does not answer 429")
        return properties

    ours = acl_properties(sam, "template.yaml")
    check(resources.get("EdgeWebAcl", {}).get("Condition") == "MakeEdgeWebAcl",
          "template.yaml's web ACL is not made only in us-east-1 without EdgeWebAclArn")
    edge = yaml.load(open("infra/aws/edge-waf.yaml"), Loader=_Tags)
    theirs = acl_properties(edge, "edge-waf.yaml")
    check(ours == theirs, "edge-waf.yaml's web ACL differs from the one template.yaml makes")
    check(edge["Parameters"].get("EdgeRateLimitPerIp", {}).get("Default")
          == parameters.get("EdgeRateLimitPerIp", {}).get("Default"),
          "edge-waf.yaml's EdgeRateLimitPerIp default differs from template.yaml's")


def sample_values():
    """Realistic values: ARNs and URLs of their real length, an FCM key file made here, two RSA keys' JWKS."""
    with tempfile.NamedTemporaryFile() as key:
        subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out",
                        key.name], check=True, capture_output=True)
        pem = open(key.name).read()
    import base64
    key_file = json.dumps({
        "type": "service_account", "project_id": "caregiver-push-prod", "private_key_id": "0" * 40,
        "private_key": pem, "client_email": "firebase-adminsdk-abcde@caregiver-push-prod.iam.gserviceaccount.com",
        "client_id": "1" * 21, "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": "https://oauth2.googleapis.com/token",
        "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
        "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/firebase-adminsdk-abcde%40"
                                "caregiver-push-prod.iam.gserviceaccount.com", "universe_domain": "googleapis.com"},
        indent=2)
    rsa_key = {"kty": "RSA", "kid": "k" * 36, "alg": "RS256", "use": "sig", "e": "AQAB", "n": "n" * 342}
    arn = "arn:aws:secretsmanager:ap-northeast-1:123456789012:secret:caregiver-push/prod/{}-AbCdEf"
    return {
        "DatabaseSecretArn": arn.format("database"), "SupabaseJwtSecretArn": arn.format("jwt"),
        "FcmServiceAccountSecretArn": arn.format("fcm"),
        "SupabaseJwksUrl": "https://abcdefghijklmnopqrst.supabase.co/auth/v1/.well-known/jwks.json",
        "SupabaseJwtIssuer": "https://abcdefghijklmnopqrst.supabase.co/auth/v1",
        "SupabaseJwks": json.dumps({"keys": [rsa_key, dict(rsa_key, kid="j" * 36)]}),
        # What {{resolve:secretsmanager:…}} put in the old template's configuration.
        "resolved:DatabaseSecretArn": "postgresql://postgres.abcdefghijklmnopqrst:" + "p" * 32
                                      + "@aws-0-ap-northeast-1.pooler.supabase.com:6543/postgres?sslmode=require",
        "resolved:SupabaseJwtSecretArn": "s" * 88,
        "resolved:FcmServiceAccountSecretArn": base64.b64encode(key_file.encode()).decode(),
        "Stage": "prod", "PushEnvironment": "PROD",
    }


def render(value, parameters, samples, inline_jwks):
    """A template value as deployed: parameters by their sample or default, resolved secrets by their sample."""
    if isinstance(value, dict):
        if "!Ref" in value:
            name = value["!Ref"]
            if name == "SupabaseJwks":
                return samples["SupabaseJwks"] if inline_jwks else ""
            if name in samples:
                return samples[name]
            return str(parameters.get(name, {}).get("Default", ""))
        if "!Sub" in value:
            text = value["!Sub"]
            resolved = re.search(r"\{\{resolve:secretsmanager:\$\{(\w+)\}", text)
            if resolved:
                return samples["resolved:" + resolved.group(1)]
            return re.sub(r"\$\{(\w+)\}", lambda m: samples.get(m.group(1), "x"), text)
        return ""  # !If … NoValue: counted by the caller
    return str(value)


def env_sizes(path, samples, inline_jwks):
    sam = yaml.load(open(path), Loader=_Tags)
    parameters = sam["Parameters"]
    sizes = {}
    for name, (_, properties) in sam_functions(sam).items():
        variables = dict(sam["Globals"]["Function"]["Environment"]["Variables"])
        variables.update(properties.get("Environment", {}).get("Variables", {}))
        total = 0
        for key, value in variables.items():
            if isinstance(value, dict) and "!If" in value:
                value = value["!If"][1]  # the secret is set (the case that counts)
            text = render(value, parameters, samples, inline_jwks)
            if text != "" or not isinstance(value, dict):
                total += len(key) + len(text.encode())
        sizes[name] = total
    return sizes


def env_size_report():
    before = sys.argv[sys.argv.index("--before") + 1] if "--before" in sys.argv else None
    samples = sample_values()
    lines, now = [], {}
    for label, path in ([("before", before)] if before else []) + [("now", "infra/aws/template.yaml")]:
        for jwks in (False, True):
            sizes = env_sizes(path, samples, jwks)
            what = "with an inline two-key JWKS" if jwks else "JWKS by URL"
            lines.append(f"environment bytes ({label}, {what}): "
                         + ", ".join(f"{name} {size}" for name, size in sizes.items()))
            if label == "now":
                check(max(sizes.values()) < 4096, f"a function's environment reaches Lambda's 4 KB: {sizes}")
                now[jwks] = sizes
    return lines, now


if __name__ == "__main__":
    sys.exit(main())

"""The routes of infra/functions.json, infra/openapi.yaml and infra/aws/template.yaml must be the same set.

A function of the table has a route (method and path) or a schedule, not both. Each routed function's route is in
the OpenAPI document and on a SAM HttpApi event, with the table's timeout. Each scheduled function is a SAM
function with a Schedule event of the same rate (and no HttpApi event: it is never routed), with the table's
timeout. The table's deploy functions (db-migrate: `"deploy": "customResource"`) are exactly the custom resources'
functions (no event, the zip invoked through a `Custom::` resource's ServiceToken); the SAM functions are exactly the
table's, both ways; and every other function of the table DependsOn that
resource, so that the deploy migrates before new code takes traffic. Exits non-zero on any difference, naming it, and prints the plain `N passed, N failed` line the CI reads.
"""
import json
import sys

import yaml


class _IgnoreTags(yaml.SafeLoader):
    """CloudFormation's short-form intrinsics (!Ref, !Sub) are not YAML types: read them as plain nodes."""


def _tag(loader, suffix, node):
    """!GetAtt X.Arn and !Ref X read as {"!GetAtt": "X.Arn"}: enough to see which resource a ServiceToken names."""
    if isinstance(node, yaml.ScalarNode):
        return {"!" + suffix: loader.construct_scalar(node)}
    return None


_IgnoreTags.add_multi_constructor("!", _tag)


def main() -> int:
    table = json.load(open("infra/functions.json"))["functions"]
    openapi = yaml.safe_load(open("infra/openapi.yaml"))
    sam = yaml.load(open("infra/aws/template.yaml"), Loader=_IgnoreTags)

    routed = [f for f in table if "method" in f or "path" in f]
    scheduled = [f for f in table if "schedule" in f]
    table_routes = {(f["method"].upper(), f["path"]) for f in routed if "method" in f and "path" in f}
    openapi_routes = {
        (method.upper(), path)
        for path, item in openapi["paths"].items()
        for method in item
        if method in {"get", "put", "post", "delete", "patch", "head", "options"}
    }
    sam_routes = set()
    sam_timeouts = {}
    # function name (the zip it runs, dist/lambda/<name>.zip) -> (its Schedule expressions, timeout, routed?)
    sam_functions = {}
    default_timeout = sam["Globals"]["Function"]["Timeout"]
    # logical id -> function name, and the functions a custom resource invokes (ServiceToken: !GetAtt X.Arn)
    logical_names = {}
    custom_resources = {}
    for logical_id, resource in sam["Resources"].items():
        if str(resource.get("Type", "")).startswith("Custom::"):
            token = resource["Properties"].get("ServiceToken") or {}
            custom_resources[logical_id] = str(token.get("!GetAtt", "")).removesuffix(".Arn")
    depends_on = {}
    for logical_id, resource in sam["Resources"].items():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        code = str(resource["Properties"].get("CodeUri", ""))
        logical_names[logical_id] = code.rsplit("/", 1)[-1].removesuffix(".zip")
        dependencies = resource.get("DependsOn", [])
        depends_on[logical_names[logical_id]] = {dependencies} if isinstance(dependencies, str) else set(dependencies)
        timeout = resource["Properties"].get("Timeout", default_timeout)
        schedules, has_route = [], False
        for event in resource["Properties"].get("Events", {}).values():
            if event["Type"] == "HttpApi":
                route = (event["Properties"]["Method"].upper(), event["Properties"]["Path"])
                sam_routes.add(route)
                sam_timeouts[route] = timeout
                has_route = True
            elif event["Type"] == "Schedule":
                schedules.append(event["Properties"]["Schedule"])
        code = str(resource["Properties"].get("CodeUri", ""))
        name = code.rsplit("/", 1)[-1].removesuffix(".zip")
        sam_functions[name] = (schedules, timeout, has_route)

    malformed = {
        f["name"]
        for f in table
        if ("method" in f) != ("path" in f) or [("path" in f), ("schedule" in f), ("deploy" in f)].count(True) != 1
    }
    checks = [
        ("every function has exactly one of a whole route, a schedule or deploy", not malformed, malformed),
        ("openapi routes == functions.json routes", openapi_routes == table_routes, openapi_routes ^ table_routes),
        ("SAM routes == functions.json routes", sam_routes == table_routes, sam_routes ^ table_routes),
    ]
    mismatched = {
        (f["method"], f["path"]): (f["timeoutSeconds"], sam_timeouts.get((f["method"], f["path"])))
        for f in routed
        if "method" in f and "path" in f and sam_timeouts.get((f["method"], f["path"])) != f["timeoutSeconds"]
    }
    checks.append(("SAM timeouts == functions.json timeouts", not mismatched, mismatched))
    # name -> (table's schedule and timeout, SAM's Schedule expressions, timeout and whether it has a route)
    unscheduled = {
        f["name"]: ((f["schedule"], f["timeoutSeconds"]), sam_functions.get(f["name"]))
        for f in scheduled
        if sam_functions.get(f["name"]) != ([f["schedule"]], f["timeoutSeconds"], False)
    }
    # and no Schedule event on a function the table does not schedule
    scheduled_names = {f["name"] for f in scheduled}
    unscheduled.update(
        {name: (None, sam) for name, sam in sam_functions.items() if sam[0] and name not in scheduled_names}
    )
    checks.append(
        ("SAM Schedule events == functions.json schedules (same rate and timeout, no route)", not unscheduled, unscheduled)
    )
    table_names = {f["name"] for f in table}
    table_deploy = {f["name"] for f in table if "deploy" in f}
    deploy_functions = {logical_names.get(function) for function in custom_resources.values()}
    stray = set(sam_functions) ^ table_names
    checks.append(("SAM functions == functions.json functions", not stray, stray))
    not_custom = {
        name
        for name in table_deploy
        if name not in deploy_functions or sam_functions.get(name, ([], 0, False))[0] or sam_functions[name][2]
    } | (deploy_functions - table_deploy)
    checks.append(
        ("the table's deploy functions are SAM custom-resource functions without events", not not_custom, not_custom)
    )
    missing_migrations = {"db-migrate"} - deploy_functions
    checks.append(("db-migrate runs as a custom resource", not missing_migrations, missing_migrations))
    not_after = {
        name for name in table_names - table_deploy if not depends_on.get(name, set()) & set(custom_resources)
    }
    checks.append(("every function of the table DependsOn the migrations custom resource", not not_after, not_after))
    failed = 0
    for name, ok, difference in checks:
        print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {sorted(difference) if isinstance(difference, set) else difference}"))
        failed += 0 if ok else 1
    print(f"{len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""The routes of infra/functions.json, infra/openapi.yaml and infra/aws/template.yaml must be the same set.

Also checks the function timeouts of the function table and the SAM template agree. Exits non-zero on any
difference, naming it, and prints the plain `N passed, N failed` line the CI reads.
"""
import json
import sys

import yaml


class _IgnoreTags(yaml.SafeLoader):
    """CloudFormation's short-form intrinsics (!Ref, !Sub) are not YAML types: read them as plain nodes."""


_IgnoreTags.add_multi_constructor("!", lambda loader, suffix, node: None)


def main() -> int:
    table = json.load(open("infra/functions.json"))["functions"]
    openapi = yaml.safe_load(open("infra/openapi.yaml"))
    sam = yaml.load(open("infra/aws/template.yaml"), Loader=_IgnoreTags)

    table_routes = {(f["method"].upper(), f["path"]) for f in table}
    openapi_routes = {
        (method.upper(), path)
        for path, item in openapi["paths"].items()
        for method in item
        if method in {"get", "put", "post", "delete", "patch", "head", "options"}
    }
    sam_routes = set()
    sam_timeouts = {}
    default_timeout = sam["Globals"]["Function"]["Timeout"]
    for resource in sam["Resources"].values():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        for event in resource["Properties"].get("Events", {}).values():
            if event["Type"] == "HttpApi":
                route = (event["Properties"]["Method"].upper(), event["Properties"]["Path"])
                sam_routes.add(route)
                sam_timeouts[route] = resource["Properties"].get("Timeout", default_timeout)

    checks = [
        ("openapi routes == functions.json routes", openapi_routes == table_routes, openapi_routes ^ table_routes),
        ("SAM routes == functions.json routes", sam_routes == table_routes, sam_routes ^ table_routes),
    ]
    mismatched = {
        (f["method"], f["path"]): (f["timeoutSeconds"], sam_timeouts.get((f["method"], f["path"])))
        for f in table
        if sam_timeouts.get((f["method"], f["path"])) != f["timeoutSeconds"]
    }
    checks.append(("SAM timeouts == functions.json timeouts", not mismatched, mismatched))
    failed = 0
    for name, ok, difference in checks:
        print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {sorted(difference) if isinstance(difference, set) else difference}"))
        failed += 0 if ok else 1
    print(f"{len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

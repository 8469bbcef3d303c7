"""The fan-out peer of `make bench`: Google's own Python Admin SDK sending one message per device.

Run by the Swift bench (Tests/Benchmarks/PeerFanOutBenchmark.swift) against the same in-process FCM emulator and
the same device tokens as our dispatcher, so that the two fan-outs can be compared in one run on one machine:

    python firebase_admin_fanout.py --base-url http://127.0.0.1:PORT --key-file KEY.json \
        --tokens TOKENS.txt --message MESSAGE.json --repetitions 5 [--api send_each|send_each_async]

- KEY.json is the service-account key the emulator issued; its `token_uri` already names the emulator's `/token`,
  which google-auth uses for the JWT-bearer grant, so the access token is minted by the emulator as ours is.
- TOKENS.txt holds one device token per line (the ones our dispatcher sent to).
- MESSAGE.json is the `{"message": {...}}` our dispatcher sends (its token is replaced per device); it is rebuilt
  with the SDK's own `messaging.Message` classes so that the SDK encodes it, as an application would.

The FCM endpoint cannot be configured: firebase-admin has emulator variables for Auth, the Realtime Database and
Cloud Tasks only (FIREBASE_AUTH_EMULATOR_HOST, FIREBASE_DATABASE_EMULATOR_HOST, CLOUD_TASKS_EMULATOR_HOST), none for
FCM. So `_MessagingService.FCM_URL` is replaced before the service is created (it is formatted with the project id
in `__init__`), and the connection pool that the SDK mounts for `https://fcm.googleapis.com` (100 connections) is
mounted for the emulator's base URL too; without it requests' default pool of 10 would apply, which is not what the
SDK runs with against FCM. Both reach into private names: the script checks they exist and fails if they moved.

One untimed round first (it mints the access token and opens connections), then `--repetitions` timed rounds, each
timing the building of the messages and one `send_each` (or `send_each_async`) call. Prints one JSON object. Exits
non-zero, naming what failed, unless every message of every round succeeded.
"""

import argparse
import asyncio
import json
import logging
import statistics
import sys
import time
import warnings

import firebase_admin
from firebase_admin import credentials, messaging
import requests.adapters


def fail(message):
    print(f"firebase_admin_fanout: {message}", file=sys.stderr)
    sys.exit(1)


def build_messages(template, tokens):
    """One `messaging.Message` per device, carrying the fields of our own message."""
    unknown = set(template) - {"token", "notification", "data", "apns"}
    if unknown:
        fail(f"the message template has fields this script does not map: {sorted(unknown)}")
    notification = template.get("notification", {})
    apns = template.get("apns", {})
    aps = apns.get("payload", {}).get("aps", {})
    messages = []
    for token in tokens:
        messages.append(
            messaging.Message(
                token=token,
                notification=messaging.Notification(title=notification.get("title"), body=notification.get("body")),
                data=template.get("data"),
                apns=messaging.APNSConfig(
                    headers=apns.get("headers"),
                    payload=messaging.APNSPayload(
                        aps=messaging.Aps(sound=aps.get("sound"), thread_id=aps.get("thread-id"))
                    ),
                ),
            )
        )
    return messages


def point_at_emulator(base_url, app):
    """Sends FCM requests to the emulator, with the connection pool the SDK uses for FCM."""
    service_class = getattr(messaging, "_MessagingService", None)
    if service_class is None or not isinstance(getattr(service_class, "FCM_URL", None), str):
        fail(f"firebase-admin {firebase_admin.__version__} has no messaging._MessagingService.FCM_URL to redirect")
    if not service_class.FCM_URL.startswith("https://fcm.googleapis.com/"):
        fail(f"unexpected FCM_URL {service_class.FCM_URL!r}")
    service_class.FCM_URL = base_url.rstrip("/") + "/v1/projects/{0}/messages:send"
    service = messaging._get_messaging_service(app)
    session = getattr(getattr(service, "_client", None), "session", None)
    if session is None or "https://fcm.googleapis.com" not in session.adapters:
        fail("the messaging service no longer mounts its own adapter for https://fcm.googleapis.com")
    fcm_adapter = session.adapters["https://fcm.googleapis.com"]
    session.mount(
        base_url.rstrip("/"),
        requests.adapters.HTTPAdapter(
            pool_connections=fcm_adapter._pool_connections,
            pool_maxsize=fcm_adapter._pool_maxsize,
            max_retries=fcm_adapter.max_retries,
        ),
    )
    if not service._fcm_url.startswith(base_url.rstrip("/")):
        fail(f"the messaging service still sends to {service._fcm_url}")
    return fcm_adapter._pool_maxsize


BATCH_LIMIT = 500  # send_each / send_each_async refuse more messages than this in one call


class Combined:
    """The responses of several batches, read like one BatchResponse."""

    def __init__(self, responses):
        self.responses = [r for response in responses for r in response.responses]
        self.success_count = sum(response.success_count for response in responses)


def batches(template, tokens):
    return [build_messages(template, tokens[i:i + BATCH_LIMIT]) for i in range(0, len(tokens), BATCH_LIMIT)]


def run_rounds(api, rounds, template, tokens):
    """The response of each round and its time in ms. More than 500 devices are sent as batches of 500, as the SDK
    requires: one after the other with `send_each`, gathered on the event loop with `send_each_async`. The async API
    runs every round on one event loop: its httpx client (created with the service) keeps connections bound to the
    loop it first ran on."""
    if api == "send_each":
        results = []
        for _ in range(rounds):
            start = time.perf_counter()
            response = Combined([messaging.send_each(batch) for batch in batches(template, tokens)])
            results.append((response, (time.perf_counter() - start) * 1000))
        return results

    async def all_rounds():
        results = []
        for _ in range(rounds):
            start = time.perf_counter()
            responses = await asyncio.gather(
                *(messaging.send_each_async(batch) for batch in batches(template, tokens)))
            results.append((Combined(list(responses)), (time.perf_counter() - start) * 1000))
        return results

    return asyncio.run(all_rounds())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--base-url", required=True, help="the emulator, e.g. http://127.0.0.1:PORT")
    parser.add_argument("--key-file", required=True, help="the service-account JSON the emulator issued")
    parser.add_argument("--tokens", required=True, help="a file of device tokens, one per line")
    parser.add_argument("--message", required=True, help='a file holding our {"message": {...}} for one device')
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--api", choices=["send_each", "send_each_async"], default="send_each")
    arguments = parser.parse_args()
    if arguments.repetitions < 1:
        fail("--repetitions must be at least 1")

    # A full pool discards connections with a warning per request at 500 devices: noise, not failure.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    # 7.x deprecates Message.token for Message.fid (an installation id); ours are registration tokens, which FCM
    # still takes as `token`, so the peer sends what we send.
    warnings.filterwarnings("ignore", message="Message.token is deprecated", category=DeprecationWarning)
    with open(arguments.tokens, encoding="utf-8") as file:
        tokens = [line.strip() for line in file if line.strip()]
    if not tokens:
        fail("no device tokens")
    with open(arguments.message, encoding="utf-8") as file:
        template = json.load(file)["message"]

    app = firebase_admin.initialize_app(credentials.Certificate(arguments.key_file))
    pool = point_at_emulator(arguments.base_url, app)

    samples = []
    successes = 0
    warm_up = None
    rounds = run_rounds(arguments.api, arguments.repetitions + 1, template, tokens)
    for round_index, (response, elapsed) in enumerate(rounds):
        if response.success_count != len(tokens):
            first = next((r.exception for r in response.responses if not r.success), None)
            fail(
                f"round {round_index}: {response.success_count} of {len(tokens)} messages succeeded "
                f"(first error: {first!r})"
            )
        if round_index == 0:
            warm_up = elapsed
        else:
            samples.append(elapsed)
            successes += response.success_count
    if successes != len(tokens) * arguments.repetitions:
        fail(f"{successes} messages succeeded, expected {len(tokens) * arguments.repetitions}")

    print(
        json.dumps(
            {
                "sdk": "firebase-admin",
                "version": firebase_admin.__version__,
                "python": sys.version.split()[0],
                "api": arguments.api,
                "devices": len(tokens),
                "repetitions": arguments.repetitions,
                "fcm_pool_maxsize": pool,
                "warm_up_ms": round(warm_up, 3),
                "samples_ms": [round(sample, 3) for sample in samples],
                "median_ms": round(statistics.median(samples), 3),
                "success_count": successes,
                "expected_success_count": len(tokens) * arguments.repetitions,
            }
        )
    )


if __name__ == "__main__":
    main()

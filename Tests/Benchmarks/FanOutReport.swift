import Foundation

/// The fan-out comparison with Google's Python Admin SDK as docs/benchmarks.md shows it: a table and a chart drawn
/// from the same rows, so that the two cannot disagree.
struct FanOutReport {
    let rows: [FanOutBenchmark.Row]
    let peer: FirebaseAdminPeer.Availability
    let peerAPIs: [String]
    let delayMilliseconds: Int

    /// The section that follows our own fan-out table, with the chart linked by `chartFile` (relative to the report).
    func markdown(chartFile: String) -> String {
        var text = "\n## Push fan-out against Google's Python Admin SDK\n\n"
        guard case .available = peer, let first = rows.first?.peers.first else {
            if case .unavailable(let reason) = peer {
                text += "**Not run:** \(reason). The chart shows our fan-out alone.\n"
            }
            text += "\n![Fan-out median ms against devices](\(chartFile))\n"
            return text
        }
        // Hard-wrapped like the rest of benchmarks.md, so that the file reads as well as it renders.
        text += """
            The same fan-out by `firebase-admin` \(first.version) (Python \(first.python)), Google's own Admin SDK,
            installed by `scripts/bench.sh` in `.build/bench-peer-venv` and run as a child process
            (`Tests/Benchmarks/peer/firebase_admin_fanout.py`) right after ours for each N: the same emulator answering
            after \(delayMilliseconds) ms, the same device tokens, our message rebuilt with `messaging.Message`, the
            access token minted by the emulator through the key file's `token_uri`. The SDK has no emulator setting
            for FCM, so the script replaces `_MessagingService.FCM_URL` with the emulator's URL and mounts for it the
            pool the SDK mounts for `https://fcm.googleapis.com` (\(first.poolSize) connections).

            - `send_each` sends each message on its own thread (a `ThreadPoolExecutor` with one worker per message,
              up to 500) through `requests`: HTTP/1.1 over TLS, at most \(first.poolSize) connections kept.
            - `send_each_async` sends every message as a coroutine through httpx with `http2=True` (httpx's default
              pool: at most 100 connections): HTTP/2 streams over TLS, as against FCM.

            The SDK takes at most 500 messages per call, so 1,000 devices are two batches of 500: one after the other
            with `send_each`, gathered on the event loop with `send_each_async` (how a team would use each).

            Both trust the emulator's CA as they would any (`REQUESTS_CA_BUNDLE` for requests and google-auth's token
            refresh, `SSL_CERT_FILE` for httpx), so the TLS handshakes are real on both sides.

            The peer's time is building the messages and one `send_each*` call, median of \(first.samples.count)
            rounds after an untimed warm-up round (token mint). It does no database work, while ours also leases the
            rows and records every outcome. The bench fails unless every peer message succeeded and the emulator
            delivered each one. Ratios: ours ÷ peer (below 1: ours is faster), and each against its own 1-device
            median.


            """
        var header = "| devices | ours ms |"
        var rule = "|---:|---:|"
        for api in peerAPIs {
            header += " \(api) ms |"
            rule += "---:|"
        }
        for api in peerAPIs {
            header += " ours ÷ \(api) |"
            rule += "---:|"
        }
        header += " ours × 1-device |"
        rule += "---:|"
        for api in peerAPIs {
            header += " \(api) × 1-device |"
            rule += "---:|"
        }
        text += header + "\n" + rule + "\n"
        guard let baseline = rows.first else { return text }
        for row in rows {
            var line = String(format: "| %d | %.1f |", row.devices, row.medianMilliseconds)
            for result in row.peers { line += String(format: " %.1f |", result.medianMilliseconds) }
            for result in row.peers {
                line += String(format: " %.2f |", row.medianMilliseconds / result.medianMilliseconds)
            }
            line += String(format: " %.2f |", row.medianMilliseconds / baseline.medianMilliseconds)
            for (index, result) in row.peers.enumerated() where index < baseline.peers.count {
                line += String(format: " %.2f |", result.medianMilliseconds / baseline.peers[index].medianMilliseconds)
            }
            text += line + "\n"
        }
        text +=
            "\nAccess tokens the emulator minted, by device count (each peer run is one process with one credential;\n"
            + "its warm-up round's ms in brackets):\n\n"
        for (index, api) in peerAPIs.enumerated() {
            let runs = rows.compactMap { row in
                index < row.peers.count
                    ? String(
                        format: "%d → %d (%.0f ms)", row.devices, row.peers[index].mints,
                        row.peers[index].warmUpMilliseconds)
                    : nil
            }
            text += "- `\(api)`: \(runs.joined(separator: ", "))\n"
        }
        let ours = rows.map { "\($0.devices) → \($0.mints)" }.joined(separator: ", ")
        text += """
            - ours (same emulator, same service account, before the peers): \(ours)

            Ours mints under a lock and shares the token. google-auth's blocking refresh
            (`if not self.valid: self.refresh(request)`) takes no lock, so each `send_each` thread that finds no token
            yet mints its own; the async API refreshes on the event loop, so once.

            """
        text += "\n![Fan-out median ms against devices, ours and firebase-admin](\(chartFile))\n"
        return text
    }

    /// Median ms per device count: ours, then each peer API.
    func chart() -> SVGBarChart {
        let colors = ["#2b6cb0", "#dd6b20", "#38a169", "#805ad5"]
        var series = [
            SVGBarChart.Series(
                name: "ours (libcurl multi)", color: colors[0], values: rows.map { $0.medianMilliseconds })
        ]
        var subtitle = "Median of 5, FCM emulator answering each send after \(delayMilliseconds) ms; lower is better."
        switch peer {
        case .available:
            subtitle += " firebase-admin \(rows.first?.peers.first?.version ?? "?") (Python)."
            for (index, api) in peerAPIs.enumerated() {
                series.append(
                    SVGBarChart.Series(
                        name: "firebase-admin \(api)", color: colors[(index + 1) % colors.count],
                        values: rows.map { index < $0.peers.count ? $0.peers[index].medianMilliseconds : nil }))
            }
        case .unavailable:
            subtitle += " firebase-admin peer not run (see benchmarks.md)."
        }
        return SVGBarChart(
            title: "Push fan-out: one dose event to N devices", subtitle: subtitle, xLabel: "devices",
            yLabel: "median ms", categories: rows.map { String($0.devices) }, series: series)
    }
}

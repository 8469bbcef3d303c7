/// The console's page, script and style, compiled into the runner: nothing is fetched from anywhere else.
///
/// The script builds every element with `document.createElement` and writes every value with `textContent`, so a
/// patient named `<script>` is shown as those characters. The page polls `/_dev/api/state` once a second.
enum ConsoleAssets {
    static let html = """
        <!doctype html>
        <html lang="ja">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>caregiver-push · dev console</title>
        <link rel="stylesheet" href="/_dev/console.css">
        <script src="/_dev/console.js" defer></script>
        </head>
        <body>
        <header>
          <h1>caregiver-push <span class="muted">dev console</span></h1>
          <span id="live" class="pill">connecting…</span>
        </header>
        <section id="actions" class="panel">
          <h2>Try it</h2>
          <p class="muted">The banner's curl lines, as buttons: the requests go through the runner like any client's.</p>
          <label>Slot <select id="slot">
            <option value="morning">morning 08:00</option><option value="noon">noon 12:00</option>
            <option value="evening">evening 18:00</option><option value="bedtime">bedtime 21:00</option>
          </select></label>
          <button id="record-dose" type="button">Record the demo patient's dose</button>
          <button id="register-device" type="button">Register another phone</button>
          <pre id="action-result" class="result" aria-live="polite"></pre>
        </section>
        <main>
          <section class="panel">
            <h2>Phone <span class="muted">— what the FCM emulator received, as the caregiver's phone shows it</span></h2>
            <div id="notifications" class="phone"></div>
          </section>
          <section class="panel">
            <h2>Invocations <span class="muted">— newest first</span></h2>
            <table><thead><tr><th>time</th><th>function</th><th>status</th><th>cold/warm</th><th>ms</th>
              <th>request id</th></tr></thead><tbody id="invocations"></tbody></table>
          </section>
          <section class="panel">
            <h2>Deliveries <span class="muted">— PENDING → SENDING → SENT / FAILED / EXPIRED</span></h2>
            <table><thead><tr><th>status</th><th>attempts</th><th>patient</th><th>date · slot</th><th>device</th>
              <th>source</th><th>updated</th><th>last error</th></tr></thead><tbody id="deliveries"></tbody></table>
            <h3>push-sweep runs</h3>
            <table><thead><tr><th>time</th><th>outcome</th><th>ms</th><th>summary</th></tr></thead>
              <tbody id="sweeps"></tbody></table>
          </section>
          <section class="panel">
            <h2>Devices</h2>
            <table><thead><tr><th>device</th><th>state</th><th>reason</th><th>platform</th><th>environment</th>
              <th>installation</th><th>last seen</th></tr></thead><tbody id="devices"></tbody></table>
          </section>
        </main>
        </body>
        </html>

        """

    static let script = #"""
        "use strict";
        (function () {
          const $ = (id) => document.getElementById(id);
          let demo = null;

          // Every value goes in as text: nothing the server sends is ever parsed as markup.
          function el(tag, attributes, ...children) {
            const node = document.createElement(tag);
            for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, String(value));
            for (const child of children) {
              if (child === null || child === undefined) continue;
              node.append(child instanceof Node ? child : document.createTextNode(String(child)));
            }
            return node;
          }
          function time(iso) {
            if (!iso) return "";
            const date = new Date(iso);
            return isNaN(date) ? String(iso) : date.toLocaleTimeString("ja-JP", { hour12: false });
          }
          function replace(id, nodes, empty, columns) {
            const target = $(id);
            target.replaceChildren(...nodes);
            if (nodes.length === 0) {
              target.append(columns ? el("tr", {}, el("td", { colspan: columns, class: "muted" }, empty))
                                    : el("p", { class: "muted" }, empty));
            }
          }

          function notificationCard(n) {
            const delivered = n.status === 200;
            return el("article", { class: "card" + (delivered ? "" : " rejected"), "data-collapse-id": n.collapseId || "" },
              el("div", { class: "card-head" }, el("span", { class: "app" }, "CAREGIVER"), el("span", { class: "when" }, time(n.receivedAt))),
              el("div", { class: "title" }, n.title || "(no title)"),
              el("div", { class: "body" }, n.body || "(no body)"),
              el("dl", {},
                el("dt", {}, "patient"), el("dd", { class: "patient" }, n.patientName === null ? n.patientId : n.patientName),
                el("dt", {}, "date · slot"), el("dd", {}, n.date + " · " + n.slot),
                el("dt", {}, "collapse id"), el("dd", { class: "mono" }, n.collapseId || "—"),
                el("dt", {}, "opens"), el("dd", { class: "deeplink" }, n.deepLink),
                el("dt", {}, "FCM"), el("dd", {}, (delivered ? "accepted" : "refused with HTTP " + n.status) + " for " + n.device)));
          }

          function render(state) {
            replace("notifications", state.notifications.map(notificationCard), "No notification yet: record a dose.");
            replace("invocations", state.invocations.map((i) => el("tr", {},
              el("td", {}, time(i.at)), el("td", {}, i.function), el("td", { class: "status s" + String(i.status).charAt(0) }, i.status),
              el("td", {}, i.mode), el("td", { class: "num" }, i.durationMs === null ? "" : i.durationMs.toFixed(1)),
              el("td", { class: "mono" }, i.requestId))), "No invocation yet.", 6);
            replace("deliveries", state.deliveries.map((d) => el("tr", { class: "delivery" },
              el("td", {}, el("span", { class: "state " + d.status }, d.status)), el("td", { class: "num" }, d.attempts),
              el("td", { class: "patient" }, d.patientName === null ? "—" : d.patientName),
              el("td", {}, (d.date || "—") + " · " + (d.slot || "—")), el("td", { class: "mono" }, d.device),
              el("td", {}, d.source || "—"), el("td", {}, time(d.updatedAt)), el("td", {}, d.lastError || ""))), "No delivery yet.", 8);
            replace("sweeps", state.sweeps.map((s) => el("tr", {},
              el("td", {}, time(s.at)), el("td", {}, s.status), el("td", { class: "num" }, s.durationMs === null ? "" : s.durationMs.toFixed(1)),
              el("td", { class: "mono" }, Object.entries(s.summary).map(([k, v]) => k + " " + v).join(", ")))),
              "No sweep has run yet (push-sweep runs on its schedule).", 4);
            replace("devices", state.devices.map((d) => el("tr", {},
              el("td", { class: "mono" }, d.device), el("td", {}, el("span", { class: "state " + (d.enabled ? "ENABLED" : "DISABLED") }, d.enabled ? "enabled" : "disabled")),
              el("td", {}, d.reason || ""), el("td", {}, d.platform), el("td", {}, d.environment),
              el("td", {}, d.installationId || ""), el("td", {}, time(d.lastSeenAt)))), "No device registered.", 7);
            const live = $("live");
            live.textContent = state.databaseError ? state.databaseError : "live · " + new Date().toLocaleTimeString("ja-JP", { hour12: false });
            live.className = "pill " + (state.databaseError ? "bad" : "ok");
          }

          async function poll() {
            try {
              const response = await fetch("/_dev/api/state", { cache: "no-store" });
              if (!response.ok) throw new Error("HTTP " + response.status);
              render(await response.json());
            } catch (error) {
              $("live").textContent = "runner unreachable (" + error.message + ")";
              $("live").className = "pill bad";
            }
            setTimeout(poll, 1000);
          }

          async function call(path, token, body, extraHeaders) {
            const headers = Object.assign({ "content-type": "application/json", authorization: "Bearer " + token }, extraHeaders || {});
            const response = await fetch(path, { method: "POST", headers, body: JSON.stringify(body) });
            $("action-result").textContent = "POST " + path + " → HTTP " + response.status + "\n" + await response.text();
          }

          async function loadDemo() {
            const response = await fetch("/_dev/api/demo", { headers: { "x-dev-console": "1" }, cache: "no-store" });
            demo = await response.json();
          }

          document.addEventListener("DOMContentLoaded", () => {
            $("record-dose").addEventListener("click", async () => {
              if (!demo) await loadDemo();
              const slot = $("slot").value;
              const times = { morning: "08:00", noon: "12:00", evening: "18:00", bedtime: "21:00" };
              await call("/api/dose-records", demo.patientToken,
                { medicationId: demo.medications[slot], scheduledAt: demo.today + "T" + times[slot] + ":00+09:00" });
            });
            $("register-device").addEventListener("click", async () => {
              if (!demo) await loadDemo();
              const suffix = Math.random().toString(16).slice(2, 10);
              await call("/api/push/register", demo.caregiverToken,
                { token: "console-phone-" + suffix, platform: "ios", environment: "DEV", installationId: "console-" + suffix });
            });
            poll();
          });
        })();

        """#

    static let style = """
        :root { color-scheme: light; --ink: #1d2430; --muted: #6b7480; --line: #e3e6ea; --accent: #2f6fde; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 14px/1.45 system-ui, "Noto Sans CJK JP", "Noto Sans JP", sans-serif; color: var(--ink);
               background: #f4f6f8; }
        header { display: flex; align-items: center; justify-content: space-between; padding: 12px 20px;
                 background: #fff; border-bottom: 1px solid var(--line); }
        h1 { font-size: 18px; margin: 0; } h2 { font-size: 15px; margin: 0 0 10px; } h3 { font-size: 13px; margin: 14px 0 6px; }
        .muted { color: var(--muted); font-weight: normal; }
        main { display: grid; grid-template-columns: minmax(300px, 380px) 1fr; gap: 16px; padding: 0 20px 20px; }
        main > section:nth-child(1) { grid-row: span 3; }
        .panel { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 14px; }
        #actions { margin: 16px 20px; }
        #actions button { margin: 4px 8px 4px 0; padding: 6px 12px; border: 1px solid var(--accent); border-radius: 6px;
                          background: var(--accent); color: #fff; cursor: pointer; }
        .result { white-space: pre-wrap; word-break: break-all; font-size: 12px; color: var(--muted); margin: 6px 0 0; }
        table { width: 100%; border-collapse: collapse; font-size: 12.5px; }
        th, td { text-align: left; padding: 4px 6px; border-bottom: 1px solid var(--line); vertical-align: top; }
        th { color: var(--muted); font-weight: 600; }
        .num { text-align: right; font-variant-numeric: tabular-nums; }
        .mono { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 11.5px; word-break: break-all; }
        .phone { background: linear-gradient(#cfd8e6, #e9edf3); border-radius: 22px; padding: 14px; min-height: 200px; }
        .card { background: rgba(255,255,255,.92); border-radius: 14px; padding: 10px 12px; margin-bottom: 10px;
                box-shadow: 0 1px 3px rgba(0,0,0,.12); }
        .card.rejected { opacity: .6; border: 1px dashed #c0392b; }
        .card-head { display: flex; justify-content: space-between; font-size: 11px; color: var(--muted); }
        .card .title { font-weight: 700; margin-top: 2px; } .card .body { margin: 2px 0 6px; }
        .card dl { display: grid; grid-template-columns: auto 1fr; gap: 1px 8px; margin: 0; font-size: 11.5px; }
        .card dt { color: var(--muted); } .card dd { margin: 0; word-break: break-all; }
        .pill { border-radius: 999px; padding: 2px 10px; font-size: 12px; background: #eee; }
        .pill.ok { background: #e3f5e8; color: #1e7b3a; } .pill.bad { background: #fde7e4; color: #b0321f; }
        .state { border-radius: 4px; padding: 1px 6px; font-size: 11.5px; font-weight: 600; background: #eef0f3; }
        .state.SENT, .state.ENABLED { background: #e3f5e8; color: #1e7b3a; }
        .state.PENDING, .state.SENDING { background: #fff4d6; color: #8a6100; }
        .state.FAILED, .state.EXPIRED, .state.DISABLED_TOKEN, .state.DISABLED { background: #fde7e4; color: #b0321f; }
        .status.s2 { color: #1e7b3a; } .status.s4, .status.s5 { color: #b0321f; }
        @media (max-width: 800px) { main { grid-template-columns: 1fr; } }

        """
}

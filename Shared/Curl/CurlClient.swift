import Codecs
import CCurl

/// Performs many HTTP requests at once over libcurl's multi interface, on the calling thread.
///
/// Transfers to one host share connections: with HTTP/2 (offered by TLS servers such as FCM) they are streams of
/// one connection, up to 100 at a time; with HTTP/1.1 up to `maxConnectionsPerHost` connections run in parallel
/// and the rest queue. Work can be scheduled for later (a retry after a back-off) from inside the completion
/// handler. Not `Sendable`: one client belongs to one thread.
public final class CurlClient {
    private let multi: UnsafeMutableRawPointer
    private var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    private var pending: [(due: ContinuousClock.Instant, request: CurlRequest, tag: Int, timeout: Int)] = []
    /// New connections opened by all transfers so far.
    public private(set) var connectionsOpened = 0
    /// No transfer starts before this instant: the server asked us to slow down (``throttle(until:)``).
    public private(set) var pausedUntil: ContinuousClock.Instant?

    /// The process's first client loads libcurl (nothing before it does: a process that sends nothing never maps it).
    /// - Parameter maxConnectionsPerHost: HTTP/1.1 connections per host. 100 by default, the pool Google's Admin
    ///   SDKs keep for FCM: an HTTP/1.1 endpoint (a proxy, the emulator) then gets the parallelism the SDK would use.
    /// - Throws: ``CurlError`` when libcurl cannot be loaded (`libraryUnavailable`, transient) or cannot create
    ///   a multi handle.
    public init(maxConnectionsPerHost: Int = 100) throws(CurlError) {
        try CurlLibrary.load()
        guard let multi = ccurl_multi_init() else { throw CurlError(.setupFailed) }
        self.multi = multi
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, maxConnectionsPerHost)
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, 100)
    }

    deinit {
        for (handle, _) in active { ccurl_multi_remove_handle(multi, handle) }
        active.removeAll()
        ccurl_multi_cleanup(multi)
    }

    /// Queues a request to start at `due` (now when omitted). `tag` identifies it in the completion handler.
    /// - Parameter timeoutMilliseconds: the bound on this one attempt, connection included.
    public func schedule(
        _ request: CurlRequest, tag: Int, at due: ContinuousClock.Instant = .now, timeoutMilliseconds: Int
    ) {
        pending.append((max(due, pausedUntil ?? due), request, tag, timeoutMilliseconds))
    }

    /// Client-side throttling: nothing waiting starts before `instant`, and nothing scheduled later either, for as
    /// long as this client lives (a warm process keeps it). Transfers already on the wire are not recalled.
    public func throttle(until instant: ContinuousClock.Instant) {
        guard instant > (pausedUntil ?? .now) else { return }
        pausedUntil = instant
        pending = pending.map { item in (max(item.due, instant), item.request, item.tag, item.timeout) }
    }

    /// Runs every scheduled transfer to completion, calling `completion` once per transfer (on this thread).
    /// `completion` may schedule more. At `deadline` whatever is still running or waiting completes with
    /// `.deadlineExceeded`.
    public func run(
        until deadline: ContinuousClock.Instant,
        completion: (_ tag: Int, _ result: Result<CurlResponse, CurlError>) -> Void
    ) {
        while !pending.isEmpty || !active.isEmpty {
            let now = ContinuousClock.now
            if now >= deadline {
                abandonAll(completion: completion)
                return
            }
            startDueTransfers(now: now, completion: completion)
            var running: Int32 = 0
            _ = ccurl_multi_perform(multi, &running)
            collectFinished(completion: completion)
            let wait = waitTime(now: ContinuousClock.now, deadline: deadline)
            if active.isEmpty {
                if !pending.isEmpty { sleep(for: wait) }
            } else {
                _ = ccurl_multi_poll(multi, nil, 0, Int32(wait.milliseconds), nil)
            }
        }
    }

    private func startDueTransfers(
        now: ContinuousClock.Instant, completion: (Int, Result<CurlResponse, CurlError>) -> Void
    ) {
        var remaining: [(due: ContinuousClock.Instant, request: CurlRequest, tag: Int, timeout: Int)] = []
        for item in pending {
            guard item.due <= now else {
                remaining.append(item)
                continue
            }
            do {
                let transfer = try CurlTransfer(request: item.request, tag: item.tag, timeoutMilliseconds: item.timeout)
                guard ccurl_multi_add_handle(multi, transfer.handle) == CURLM_OK else {
                    completion(item.tag, .failure(CurlError(.setupFailed)))
                    continue
                }
                active[transfer.handle] = transfer
            } catch {
                completion(item.tag, .failure(error))
            }
        }
        pending = remaining
    }

    private func collectFinished(completion: (Int, Result<CurlResponse, CurlError>) -> Void) {
        var queued: Int32 = 0
        while let message = ccurl_multi_info_read(multi, &queued) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle,
                let transfer = active.removeValue(forKey: handle)
            else { continue }
            let code = message.pointee.data.result
            ccurl_multi_remove_handle(multi, handle)
            connectionsOpened += transfer.connectionsOpened
            completion(transfer.tag, transfer.result(code: code))
        }
    }

    /// At the deadline: what was on the wire may have reached the server (`deadlineExceeded`); what never started
    /// certainly did not (`notStarted`).
    private func abandonAll(completion: (Int, Result<CurlResponse, CurlError>) -> Void) {
        let onTheWire = active.values.map(\.tag)
        let neverStarted = pending.map(\.tag)
        for (handle, _) in active { ccurl_multi_remove_handle(multi, handle) }
        active.removeAll()
        pending.removeAll()
        for tag in onTheWire { completion(tag, .failure(CurlError(.deadlineExceeded))) }
        for tag in neverStarted { completion(tag, .failure(CurlError(.notStarted))) }
    }

    /// How long to wait for sockets: until the next scheduled start or the deadline, at most a second.
    private func waitTime(now: ContinuousClock.Instant, deadline: ContinuousClock.Instant) -> Duration {
        var wait = min(Duration.seconds(1), deadline - now)
        if let nextDue = pending.map(\.due).min() { wait = min(wait, nextDue - now) }
        return max(wait, .milliseconds(1))
    }

    private func sleep(for duration: Duration) {
        _ = ccurl_multi_poll(multi, nil, 0, Int32(duration.milliseconds), nil)
    }

    /// Performs one request and waits for it (the OAuth exchange, the Runtime API).
    public static func perform(_ request: CurlRequest, timeoutMilliseconds: Int) -> Result<
        CurlResponse, CurlError
    > {
        do {
            let client = try CurlClient(maxConnectionsPerHost: 1)
            var outcome: Result<CurlResponse, CurlError> = .failure(CurlError(.deadlineExceeded))
            client.schedule(request, tag: 0, timeoutMilliseconds: timeoutMilliseconds)
            client.run(until: .now + .milliseconds(timeoutMilliseconds + 500)) { _, result in outcome = result }
            return outcome
        } catch {
            return .failure(error)
        }
    }
}

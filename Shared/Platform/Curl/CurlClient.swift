import Codecs
import CCurl

/// Performs many HTTP requests at once over libcurl's multi interface, on the calling thread.
///
/// Transfers to one host share connections. Over TLS (FCM offers HTTP/2 by ALPN) they are streams: the client
/// opens just the connections a batch needs, ⌈in flight ÷ ``streamsPerConnection``⌉, all at once, and puts the
/// other transfers on them once they are up, so 100 devices go out as 100 streams of one connection and 1,000 as
/// 10 connections of 100, every one in flight together. (libcurl alone, given many transfers at once, opens a
/// connection for each transfer that finds the others still connecting or full.) With HTTP/1.1 up to
/// `maxConnectionsPerHost` connections run in parallel and the rest queue. Work can be scheduled for later (a retry
/// after a back-off) from inside the completion handler. Not `Sendable`: one client belongs to one thread.
public final class CurlClient {
    /// Streams on one HTTP/2 connection: what FCM allows (and libcurl is told to use at most).
    public static let streamsPerConnection = 100

    /// A transfer waiting to start.
    private struct Waiting {
        let request: CurlRequest
        let tag: Int
    }

    private let multi: UnsafeMutableRawPointer
    private let maxConnectionsPerHost: Int
    private var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    /// What waits to start, and when it may (the start-due rules).
    private var waiting: StartSchedule<Waiting>
    /// What the client knows of each origin's HTTP/2 connections, for the stream cap.
    private var origins: [String: StartSchedule<Waiting>.Streams] = [:]
    /// Transfers opening a connection whose handshake has not been seen done yet: the only ones
    /// ``noteConnectedOpeners()`` looks at, not every transfer on the wire.
    private var openers: [CurlTransfer] = []
    /// New connections opened by all transfers so far.
    public private(set) var connectionsOpened = 0
    /// No transfer starts before this instant: the server asked us to slow down (``throttle(until:)``).
    public var pausedUntil: ContinuousClock.Instant? { waiting.pausedUntil }

    /// The process's first client loads libcurl (nothing before it does: a process that sends nothing never maps it).
    /// - Parameter maxConnectionsPerHost: connections per host. 100 by default, the pool Google's Admin SDKs keep
    ///   for FCM: an HTTP/1.1 endpoint (a proxy, the emulator) then gets the parallelism the SDK would use, and an
    ///   HTTP/2 one up to 100 × ``streamsPerConnection`` transfers in flight.
    /// - Throws: ``CurlError`` when libcurl cannot be loaded (`libraryUnavailable`, transient) or cannot create
    ///   a multi handle.
    public init(maxConnectionsPerHost: Int = 100) throws(CurlError) {
        try CurlLibrary.load()
        guard let multi = ccurl_multi_init() else { throw CurlError(.setupFailed) }
        self.multi = multi
        self.maxConnectionsPerHost = max(maxConnectionsPerHost, 1)
        waiting = StartSchedule(
            streamsPerConnection: Self.streamsPerConnection, maxConnectionsPerHost: self.maxConnectionsPerHost)
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, self.maxConnectionsPerHost)
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, Self.streamsPerConnection)
        // Keep every connection the host allows between batches. libcurl's own cache limit follows the number of
        // transfers added (four per transfer); as a batch's last transfers finish it shrinks and closes connections
        // that the next batch, counting on them, would then open again with new handshakes.
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, self.maxConnectionsPerHost)
    }

    deinit {
        for (handle, _) in active { ccurl_multi_remove_handle(multi, handle) }
        active.removeAll()
        ccurl_multi_cleanup(multi)
    }

    /// Queues a request to start at `due` (now when omitted). `tag` identifies it in the completion handler.
    /// - Parameters:
    ///   - timeoutMilliseconds: the bound on this one attempt, connection included.
    ///   - notAfter: the request must be done by then: it never starts later (it completes `.notStarted`), and its
    ///     attempt ends there at the latest (a sender's lease runs out then).
    public func schedule(
        _ request: CurlRequest, tag: Int, at due: ContinuousClock.Instant = .now, timeoutMilliseconds: Int,
        notAfter: ContinuousClock.Instant? = nil
    ) {
        waiting.add(
            Waiting(request: request, tag: tag), due: due, timeoutMilliseconds: timeoutMilliseconds, notAfter: notAfter,
            stream: request.multiplexes ? String(request.origin) : nil)
    }

    /// Transfers scheduled and not yet done: waiting to start, or on the wire.
    public var outstanding: Int { waiting.count + active.count }

    /// Client-side throttling: nothing waiting starts before `instant`, and nothing scheduled later either, for as
    /// long as this client lives (a warm process keeps it). Transfers already on the wire are not recalled.
    public func throttle(until instant: ContinuousClock.Instant) {
        waiting.pause(until: instant, now: .now)
    }

    /// Runs every scheduled transfer to completion, calling `completion` once per transfer (on this thread).
    /// `completion` may schedule more. At `deadline` whatever is still running or waiting completes with
    /// `.deadlineExceeded`.
    public func run(
        until deadline: ContinuousClock.Instant,
        completion: (_ tag: Int, _ result: Result<CurlResponse, CurlError>) -> Void
    ) {
        while !waiting.isEmpty || !active.isEmpty {
            let now = ContinuousClock.now
            if now >= deadline {
                abandonAll(now: now, deadline: deadline, completion: completion)
                return
            }
            startDueTransfers(now: now, deadline: deadline, completion: completion)
            var running: Int32 = 0
            _ = ccurl_multi_perform(multi, &running)
            noteConnectedOpeners()
            collectFinished(completion: completion)
            let wait = waitTime(now: ContinuousClock.now, deadline: deadline)
            if active.isEmpty {
                if !waiting.isEmpty { sleep(for: wait) }
            } else {
                _ = ccurl_multi_poll(multi, nil, 0, Int32(wait.milliseconds), nil)
            }
        }
    }

    /// Starts what ``waiting`` says is due: the other transfers on an origin's connections as its stream cap
    /// allows, and a new connection for those beyond them. A start that fails (a transfer libcurl cannot set up)
    /// completes at once; the pass had counted it on the wire for the transfers after it, the next pass does not.
    private func startDueTransfers(
        now: ContinuousClock.Instant, deadline: ContinuousClock.Instant,
        completion: (Int, Result<CurlResponse, CurlError>) -> Void
    ) {
        // A completion called below may schedule more (a retry, a sender's next lease): it waits behind what still
        // waits.
        for verdict in waiting.pass(at: now, deadline: deadline, origins: origins) {
            switch verdict {
            case .refused(let item):
                completion(item.tag, .failure(CurlError(.notStarted)))
            case .start(let item, let timeout, let opensConnection):
                do {
                    let transfer = try CurlTransfer(
                        request: item.request, tag: item.tag, timeoutMilliseconds: timeout,
                        opensConnection: opensConnection)
                    guard ccurl_multi_add_handle(multi, transfer.handle) == CURLM_OK else {
                        completion(item.tag, .failure(CurlError(.setupFailed)))
                        continue
                    }
                    let key = String(item.request.origin)
                    active[transfer.handle] = transfer
                    transfer.origin = key
                    origins[key, default: .init()].inFlight += 1
                    if opensConnection {
                        origins[key, default: .init()].connecting += 1
                        openers.append(transfer)
                    }
                } catch {
                    completion(item.tag, .failure(error))
                }
            }
        }
    }

    /// Counts the connections whose handshake finished since the last look: their streams are free for the
    /// transfers waiting behind them.
    private func noteConnectedOpeners() {
        guard !openers.isEmpty else { return }
        for transfer in openers where !transfer.connectionCounted && transfer.isConnected {
            transfer.connectionCounted = true
            origins[transfer.origin]?.connecting -= 1
            origins[transfer.origin]?.connections += 1
        }
        // Counted here, or when it finished (``noteFinished(_:code:)``).
        openers.removeAll { $0.connectionCounted }
    }

    /// Updates what the client knows of the transfer's origin once it is done.
    private func noteFinished(_ transfer: CurlTransfer, code: CURLcode) {
        guard var origin = origins[transfer.origin] else { return }
        origin.inFlight -= 1
        if transfer.opensConnection && !transfer.connectionCounted {
            transfer.connectionCounted = true
            origin.connecting -= 1
            if transfer.isConnected { origin.connections += 1 }
        }
        if code == CURLE_OK && transfer.responseHTTPVersion == 1 {
            // The server did not take HTTP/2: one request per connection, libcurl's per-host pool decides.
            origin.multiplexes = false
        } else if code != CURLE_OK && code != CURLE_OPERATION_TIMEDOUT && origin.connections > 0
            && transfer.connectionsOpened == 0
        {
            // Its connection may have gone (a GOAWAY, a reset): the next batch opens another rather than counting
            // on it.
            origin.connections -= 1
        }
        origins[transfer.origin] = origin
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
            noteFinished(transfer, code: code)
            completion(transfer.tag, transfer.result(code: code))
        }
    }

    /// At the deadline: what was on the wire may have reached the server (`deadlineExceeded`); what never started
    /// certainly did not (`notStarted`).
    private func abandonAll(
        now: ContinuousClock.Instant, deadline: ContinuousClock.Instant,
        completion: (Int, Result<CurlResponse, CurlError>) -> Void
    ) {
        let onTheWire = active.values.map(\.tag)
        // At the deadline the pass starts nothing: it refuses everything still waiting.
        let neverStarted = waiting.pass(at: now, deadline: deadline).map(\.item.tag)
        for (handle, transfer) in active {
            ccurl_multi_remove_handle(multi, handle)
            noteFinished(transfer, code: CURLE_OPERATION_TIMEDOUT)
        }
        active.removeAll()
        openers.removeAll()
        for tag in onTheWire { completion(tag, .failure(CurlError(.deadlineExceeded))) }
        for tag in neverStarted { completion(tag, .failure(CurlError(.notStarted))) }
    }

    /// How long to wait for sockets: until the next scheduled start or the deadline, at most a second.
    private func waitTime(now: ContinuousClock.Instant, deadline: ContinuousClock.Instant) -> Duration {
        max(min(Duration.seconds(1), waiting.nextLook(deadline: deadline) - now), .milliseconds(1))
    }

    private func sleep(for duration: Duration) {
        _ = ccurl_multi_poll(multi, nil, 0, Int32(duration.milliseconds), nil)
    }

    /// Performs one request on this client and waits for it. The connection stays in the client's pool for the
    /// next request (keep-alive).
    public func perform(_ request: CurlRequest, timeoutMilliseconds: Int) -> Result<CurlResponse, CurlError> {
        var outcome: Result<CurlResponse, CurlError> = .failure(CurlError(.deadlineExceeded))
        schedule(request, tag: 0, timeoutMilliseconds: timeoutMilliseconds)
        run(until: .now + .milliseconds(timeoutMilliseconds + 500)) { _, result in outcome = result }
        return outcome
    }

    /// Performs one request on a client of its own and waits for it (the OAuth exchange, a one-off call).
    public static func perform(_ request: CurlRequest, timeoutMilliseconds: Int) -> Result<
        CurlResponse, CurlError
    > {
        do {
            return try CurlClient(maxConnectionsPerHost: 1).perform(request, timeoutMilliseconds: timeoutMilliseconds)
        } catch {
            return .failure(error)
        }
    }
}

import Codecs

/// When each queued transfer may start: the start-due rules of ``CurlClient``, as a value. No I/O and no clock: every
/// question takes the instant it is asked at, so the rules can be checked at chosen instants, and a stand-in for the
/// client (the unit tests' scripted FCM) keeps them by using this very type.
///
/// - A transfer starts at its due instant, not before.
/// - It never starts at or after its `notAfter`: the first pass that finds it cannot start before then (at its
///   `notAfter` at the latest) refuses it, and the attempt of one that starts is cut to end there.
/// - A pause (``pause(until:now:)``: the server asked to slow down) holds back every waiting transfer, and every one
///   added later, until it ends.
/// - At the run's deadline nothing starts: everything still waiting is refused.
/// - A transfer that is a stream of an origin's HTTP/2 connections (``add(_:due:timeoutMilliseconds:notAfter:stream:)``
///   names the origin) starts only on a free stream, at most ``streamsPerConnection`` a connection: past them it
///   waits for the streams of the connections being opened, or opens a connection of its own while the origin has
///   fewer than ``maxConnectionsPerHost``.
struct StartSchedule<Item> {
    /// What the client knows of one origin's HTTP/2 connections, as the stream cap counts them.
    struct Streams: Equatable {
        /// `false` once a response came back over HTTP/1.x: no stream cap then (libcurl's per-host pool governs).
        var multiplexes = true
        /// Connections up (handshake done) and kept by libcurl's pool.
        var connections = 0
        /// Transfers opening a connection of their own whose handshake is not done yet.
        var connecting = 0
        /// Transfers on the wire, the connecting ones included.
        var inFlight = 0
    }

    /// What a pass decides for one waiting transfer.
    enum Verdict {
        /// Start it now; its attempt may last `timeoutMilliseconds`. `opensConnection`: on a new connection of its
        /// own, whose streams the transfers behind it wait for.
        case start(Item, timeoutMilliseconds: Int, opensConnection: Bool)
        /// It can no longer start in time (its `notAfter` or the run's deadline came first): it was never sent.
        case refused(Item)

        var item: Item {
            switch self {
            case .start(let item, _, _), .refused(let item): item
            }
        }
    }

    private struct Entry {
        var due: ContinuousClock.Instant
        let item: Item
        let timeoutMilliseconds: Int
        let notAfter: ContinuousClock.Instant?
        /// The origin whose HTTP/2 connections it is a stream of, or `nil`: not counted against the stream cap.
        let stream: String?

        /// When a pass first has something to do with it: start it, or refuse it.
        var event: ContinuousClock.Instant { notAfter.map { min($0, due) } ?? due }
    }

    /// Streams on one HTTP/2 connection.
    let streamsPerConnection: Int
    /// Connections one origin may have, open and opening.
    let maxConnectionsPerHost: Int
    /// No transfer starts before this instant (``pause(until:now:)``).
    private(set) var pausedUntil: ContinuousClock.Instant?
    private var waiting: [Entry] = []
    /// The earliest ``Entry/event`` of `waiting`: before it, a pass has nothing to do and does not walk `waiting` (a
    /// paced sweep keeps thousands waiting, and the client looks again at every response).
    private var nextEvent: ContinuousClock.Instant?

    init(streamsPerConnection: Int, maxConnectionsPerHost: Int) {
        self.streamsPerConnection = streamsPerConnection
        self.maxConnectionsPerHost = maxConnectionsPerHost
    }

    /// Transfers waiting to start.
    var count: Int { waiting.count }

    var isEmpty: Bool { waiting.isEmpty }

    /// Queues `item` to start at `due`, or when a pause in force ends if that is later.
    /// - Parameters:
    ///   - timeoutMilliseconds: the bound on its attempt, cut to end at `notAfter`.
    ///   - notAfter: it never starts at or after this instant.
    ///   - stream: the origin whose HTTP/2 connections it is a stream of (an `https` request), or `nil`.
    mutating func add(
        _ item: Item, due: ContinuousClock.Instant, timeoutMilliseconds: Int, notAfter: ContinuousClock.Instant?,
        stream: String? = nil
    ) {
        let entry = Entry(
            due: max(due, pausedUntil ?? due), item: item, timeoutMilliseconds: timeoutMilliseconds,
            notAfter: notAfter, stream: stream)
        waiting.append(entry)
        nextEvent = nextEvent.map { min($0, entry.event) } ?? entry.event
    }

    /// Holds back everything waiting, and everything added later, until `instant`; a pause ending no later than
    /// one already in force (or than `now`) changes nothing.
    mutating func pause(until instant: ContinuousClock.Instant, now: ContinuousClock.Instant) {
        guard instant > (pausedUntil ?? now) else { return }
        pausedUntil = instant
        for index in waiting.indices { waiting[index].due = max(waiting[index].due, instant) }
        nextEvent = waiting.map(\.event).min()
    }

    /// When a pass next has something to do: the earliest instant a waiting transfer is due or must be refused,
    /// and the run's `deadline` at the latest.
    func nextLook(deadline: ContinuousClock.Instant) -> ContinuousClock.Instant {
        min(nextEvent ?? deadline, deadline)
    }

    /// One pass at `now`: what starts now and what is refused, in the order they were queued; the rest keep
    /// waiting, ahead of anything added after the pass.
    /// - Parameter origins: what the client knows of each origin's connections now (an origin not listed: none
    ///   yet). Each start the pass admits counts on it as on the wire (and connecting, when it opens a connection)
    ///   for the transfers after it.
    mutating func pass(
        at now: ContinuousClock.Instant, deadline: ContinuousClock.Instant, origins: [String: Streams] = [:]
    ) -> [Verdict] {
        if now >= deadline {
            let refused = waiting.map { Verdict.refused($0.item) }
            waiting = []
            nextEvent = nil
            return refused
        }
        guard let next = nextEvent, next <= now else { return [] }
        var origins = origins
        /// Per origin, transfers of this pass waiting for a connection that is being opened.
        var waitingForOpeners: [String: Int] = [:]
        var verdicts: [Verdict] = []
        var remaining: [Entry] = []
        for entry in waiting {
            if let notAfter = entry.notAfter, max(entry.due, now) >= notAfter {
                verdicts.append(.refused(entry.item))
                continue
            }
            guard entry.due <= now else {
                remaining.append(entry)
                continue
            }
            var timeout = entry.timeoutMilliseconds
            if let notAfter = entry.notAfter { timeout = max(min(timeout, (notAfter - now).milliseconds), 1) }
            var opensConnection = false
            if let key = entry.stream {
                let origin = origins[key] ?? Streams()
                if origin.multiplexes {
                    let freeStreams = origin.connections * streamsPerConnection - (origin.inFlight - origin.connecting)
                    if freeStreams <= 0 {
                        // Streams of the connections being opened, less the opener's own.
                        let comingStreams = origin.connecting * (streamsPerConnection - 1)
                        if waitingForOpeners[key, default: 0] < comingStreams
                            || origin.connections + origin.connecting >= maxConnectionsPerHost
                        {
                            waitingForOpeners[key, default: 0] += 1
                            remaining.append(entry)
                            continue
                        }
                        opensConnection = true
                    }
                }
                origins[key, default: Streams()].inFlight += 1
                if opensConnection { origins[key, default: Streams()].connecting += 1 }
            }
            verdicts.append(.start(entry.item, timeoutMilliseconds: timeout, opensConnection: opensConnection))
        }
        waiting = remaining
        nextEvent = waiting.map(\.event).min()
        return verdicts
    }
}

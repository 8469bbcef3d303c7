import Codecs
import Foundation
import NIOCore

/// What the emulator has issued and received. An actor: requests arrive on many connections at once.
public actor FCMEmulatorState {
    /// One `messages:send` request as received, whatever it was answered.
    public struct Received: Sendable {
        public let receivedAt: Date
        public let deviceToken: String
        public let status: Int
        public let attempt: Int
        public let message: JSONValue
        public let name: String?
        /// The connection it came on, when the server could tell (the emulator's own port).
        public let connection: Connection?
        /// Sent with `validate_only`: checked and answered, never delivered.
        public var validateOnly = false
    }

    /// A client connection that carried `messages:send`: numbered in order of first use.
    public struct Connection: Sendable, Hashable {
        public let number: Int
        public let http2: Bool
    }

    /// Every connection seen, kept (with its channel, so that its identity cannot be reused by a later one) until
    /// a reset.
    private var connections: [ObjectIdentifier: (channel: any Channel, connection: Connection)] = [:]
    private var inFlight: [Int: Int] = [:]
    private var maxInFlight = 0
    /// Whether the emulator's own port speaks TLS.
    public private(set) var tls = false

    private var issuedTokens: [String: Date] = [:]
    private var attemptsByToken: [String: Int] = [:]
    private var messageCounter = 0
    public private(set) var received: [Received] = []
    public private(set) var mints = 0
    /// Delay before answering each `messages:send` (a slow FCM).
    public private(set) var responseDelayMilliseconds: Int
    /// Token URL the assertion's `aud` must name, known once the server is bound.
    public private(set) var tokenURL: String?
    /// A transient failure on some first attempts (``failFirstAttempts(every:retryAfterSeconds:)``), `nil`: none.
    private var firstAttemptFailure: (every: Int, retryAfterSeconds: Int?)?
    /// Attempts per message (device and message text), for the first-attempt failures.
    private var attemptsByMessage: [String: Int] = [:]
    private var firstAttempts = 0

    public init(responseDelayMilliseconds: Int = 0) {
        self.responseDelayMilliseconds = responseDelayMilliseconds
    }

    func bound(tokenURL: String) {
        self.tokenURL = tokenURL
    }

    func setTransport(tls: Bool) {
        self.tls = tls
    }

    func connection(for channel: any Channel, http2: Bool) -> Connection {
        let id = ObjectIdentifier(channel)
        if let known = connections[id] { return known.connection }
        let connection = Connection(number: connections.count + 1, http2: http2)
        connections[id] = (channel, connection)
        return connection
    }

    func streamStarted(on connection: Connection) {
        inFlight[connection.number, default: 0] += 1
        maxInFlight = max(maxInFlight, inFlight[connection.number] ?? 0)
    }

    func streamEnded(on connection: Connection) {
        inFlight[connection.number, default: 1] -= 1
    }

    /// Connections that carried sends, and the most sends in flight on one connection at once.
    public var connectionUsage: (connections: Int, maxConcurrentStreams: Int) {
        (connections.count, maxInFlight)
    }

    /// Forgets the peak of concurrent streams (connections stay known).
    public func resetStreamCount() {
        maxInFlight = 0
    }

    func issueAccessToken(lifetime: TimeInterval) -> String {
        mints += 1
        let token = "ya29.emulated-\(UUID().uuidString.lowercased())"
        issuedTokens[token] = Date().addingTimeInterval(lifetime)
        return token
    }

    func isValid(accessToken: String) -> Bool {
        guard let expiry = issuedTokens[accessToken] else { return false }
        return expiry > Date()
    }

    /// Counts an attempt for a device token: 1 for the first request naming it.
    func nextAttempt(for deviceToken: String) -> Int {
        attemptsByToken[deviceToken, default: 0] += 1
        return attemptsByToken[deviceToken, default: 1]
    }

    /// Answers 503 UNAVAILABLE to every `every`-th message's first attempt (counted over first attempts, so exactly
    /// one in `every`), with `Retry-After` when given; a retry of that message (the same device and text) succeeds.
    /// What a load benchmark needs of a flaky FCM: transient failures spread over every device, not tied to markers.
    public func failFirstAttempts(every: Int, retryAfterSeconds: Int?) {
        firstAttemptFailure = every > 0 ? (every, retryAfterSeconds) : nil
    }

    /// The injected failure for this attempt at the message `key`, if any (``failFirstAttempts(every:retryAfterSeconds:)``).
    func injectedFailure(forMessage key: String) -> FCMErrorScenario.Answer? {
        guard let failure = firstAttemptFailure else { return nil }
        attemptsByMessage[key, default: 0] += 1
        guard attemptsByMessage[key] == 1 else { return nil }
        firstAttempts += 1
        guard firstAttempts % failure.every == 0 else { return nil }
        return FCMErrorScenario.unavailable(retryAfterSeconds: failure.retryAfterSeconds)
    }

    func nextMessageName(project: String) -> String {
        messageCounter += 1
        let hex = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        return "projects/\(project)/messages/0:\(Int(Date().timeIntervalSince1970 * 1000))\(messageCounter)%\(hex)"
    }

    func record(_ entry: Received) {
        received.append(entry)
    }

    /// Changes behaviour at run time (`POST /_emulator/fcm/config`).
    func configure(responseDelayMilliseconds: Int?, revokeAccessTokens: Bool) {
        if let responseDelayMilliseconds { self.responseDelayMilliseconds = max(0, responseDelayMilliseconds) }
        if revokeAccessTokens { issuedTokens.removeAll() }
    }

    /// Forgets what was received and the attempts counted (`POST /_emulator/fcm/reset`).
    public func reset() {
        received.removeAll()
        attemptsByToken.removeAll()
        attemptsByMessage.removeAll()
        mints = 0
        maxInFlight = 0
    }
}

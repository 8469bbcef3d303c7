/// What became of one invocation, as the gateway needs it.
enum FunctionOutcome: Sendable {
    /// The function's response document (stdout, or the Runtime API's response body), and the process that wrote it.
    case output([UInt8], pid: Int32)
    case timedOut
    /// The function ended (or reported an error) without a response.
    case failed(String)
    /// No warm worker took the invocation before its queue deadline (none live, or all busy): a 503.
    case unavailable(retryAfterSeconds: Int)
}

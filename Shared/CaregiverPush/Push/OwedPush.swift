/// The push a recording owes (docs/behaviour.md#sending): what ``RecordingTransaction/enqueuePush(_:in:ifRecorded:)``
/// gives back for the outbox statement it adds, and what later sends that push.
///
/// One value for both steps, so that neither can be forgotten alone: the enqueue's result is not discardable, the
/// recording body hands it back (``RecordingTransaction/Recording/init(_:owing:)``) when the dose was recorded, and
/// ``RecordingTransaction/run(_:source:context:lock:_:)`` returns it with the body's value once the transaction has
/// committed — an endpoint that never dispatches it does not compile (the project treats an unused value as an
/// error). The endpoint responds, then calls ``dispatch()``. It is not `~Copyable`: Swift 6.3 has no tuple with a
/// noncopyable element to return it in beside the value, and a noncopyable field could be dropped unused without
/// a word, which is the one mistake this type is for.
///
/// Not `Sendable`: it runs on the invocation's thread with the invocation's connection.
struct OwedPush {
    /// The event whose deliveries are owed, with the invocation that owes them; `nil` when nothing is (the dose was
    /// recorded before, or this deployment sends no push).
    private let owed: (eventKey: String, context: InvocationContext)?

    /// Nothing owed.
    static var nothing: OwedPush { OwedPush(owed: nil) }

    /// The push of `eventKey`, owed once the transaction that queued it has committed.
    init(eventKey: String, context: InvocationContext) {
        owed = (eventKey, context)
    }

    private init(owed: (eventKey: String, context: InvocationContext)?) {
        self.owed = owed
    }

    /// Sends the deliveries the event owes with the invocation's own resources, stopping before the invocation's
    /// deadline; what is not sent by then stays for `push-sweep`. Never throws: it runs after the response.
    func dispatch() {
        guard let (eventKey, context) = owed.map({ ($0.eventKey, $0.context) }) else { return }
        let dispatcher = PushDispatcher(configuration: context.configuration, logger: context.logger)
        dispatcher.dispatch(
            eventKey: eventKey, database: context.database, push: context.push,
            deadline: dispatcher.sendDeadline(hostDeadline: context.deadline), metrics: context.metrics)
    }
}

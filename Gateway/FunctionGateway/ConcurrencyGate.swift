/// Admits at most `limit` invocations of one function at once; others wait in a bounded queue for a bounded time,
/// then get a 503 (docs/behaviour.md#gateway).
actor ConcurrencyGate {
    private let limit: Int
    private let queueLimit: Int
    private var running = 0
    private var waiting: [(id: Int, continuation: CheckedContinuation<Bool, Never>)] = []
    private var nextID = 0

    init(limit: Int, queueLimit: Int) {
        self.limit = max(limit, 1)
        self.queueLimit = max(queueLimit, 0)
    }

    /// Waits for a slot; `false` when the queue is full or `timeout` passed first.
    func acquire(timeout: Duration) async -> Bool {
        if running < limit {
            running += 1
            return true
        }
        guard waiting.count < queueLimit else { return false }
        nextID += 1
        let id = nextID
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            await self?.expire(id)
        }
        let admitted = await withCheckedContinuation { continuation in
            waiting.append((id, continuation))
        }
        timer.cancel()
        return admitted
    }

    /// Frees a slot, handing it to the longest waiter.
    func release() {
        if waiting.isEmpty {
            running -= 1
        } else {
            waiting.removeFirst().continuation.resume(returning: true)
        }
    }

    private func expire(_ id: Int) {
        guard let index = waiting.firstIndex(where: { $0.id == id }) else { return }
        waiting.remove(at: index).continuation.resume(returning: false)
    }

    var inFlight: Int { running }
}

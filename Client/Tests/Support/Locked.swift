import Foundation

/// A value several threads read and write under an `NSLock`: `Synchronization.Mutex` needs macOS 15 and iOS 18,
/// newer than the platforms the kit declares.
public final class Locked<Value>: @unchecked Sendable {
    // @unchecked: every access to `value` holds `lock`.
    private let lock = NSLock()
    private var value: Value

    public init(_ value: Value) {
        self.value = value
    }

    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

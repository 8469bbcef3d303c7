import Foundation

/// `infra/functions.json`: the functions, their routes and their limits — what a host needs to run them.
public struct FunctionTable: Codable, Sendable, Equatable {
    public struct Function: Codable, Sendable, Equatable {
        public let name: String
        public let method: String
        public let path: String
        /// Per-invocation timeout; longer than `PUSH_SEND_DEADLINE_MS` so that the push can finish.
        public let timeoutSeconds: Int
        public let memoryMB: Int
        /// How many invocations of this function may run at once.
        public let concurrency: Int
    }

    public let functions: [Function]

    /// Reads and checks a function table.
    /// - Throws: when the file is unreadable, not this shape, or names a function or route twice.
    public init(contentsOf url: URL) throws {
        let table = try JSONDecoder().decode(FunctionTable.self, from: Data(contentsOf: url))
        guard Set(table.functions.map(\.name)).count == table.functions.count,
            Set(table.functions.map { "\($0.method) \($0.path)" }).count == table.functions.count
        else { throw FunctionTableError.duplicate }
        self = table
    }

    public func function(named name: String) -> Function? {
        functions.first { $0.name == name }
    }
}

public enum FunctionTableError: Error, CustomStringConvertible {
    case duplicate
    public var description: String { "the function table names a function or a route twice" }
}

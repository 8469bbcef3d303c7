import Codecs
import Foundation
import FunctionRuntime

/// Forwards a function's stderr to the gateway's, one JSON line per line, tagged with the function and request.
struct StderrForwarder: Sendable {
    let function: String

    func forward(_ line: String, requestID: String?) {
        guard !line.isEmpty else { return }
        let object = (try? JSONValue.parse(line))?.objectValue
        if let object, let tagged = tagged(line, object, requestID: requestID) {
            Self.write(tagged)
            return
        }
        var members = object ?? ["level": .string("info"), "msg": .string(line)]
        members["function"] = members["function"] ?? .string(function)
        if let requestID, members["requestId"] == nil { members["requestId"] = .string(requestID) }
        members["source"] = .string("function")
        guard let bytes = JSONValue.object(members).serialized else { return }
        Self.write(bytes + [UInt8(ascii: "\n")])
    }

    /// A function's own JSON line (what its log handler writes) with the gateway's members put in front, the
    /// line's own text kept as it is — no second encoding of every line a worker logs. `nil` when the line does not
    /// lend itself to it (not starting with `{`, empty, already naming a `source`, or a name that would need
    /// escaping): the caller encodes it afresh.
    private func tagged(_ line: String, _ object: [String: JSONValue], requestID: String?) -> [UInt8]? {
        guard line.utf8.first == UInt8(ascii: "{"), !object.isEmpty, object["source"] == nil else { return nil }
        var text = #"{"source":"function","#
        if object["function"] == nil {
            guard Self.isPlain(function) else { return nil }
            text += #""function":""# + function + #"","#
        }
        if let requestID, object["requestId"] == nil {
            guard Self.isPlain(requestID) else { return nil }
            text += #""requestId":""# + requestID + #"","#
        }
        var bytes = Array(text.utf8)
        bytes += line.utf8.dropFirst()
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }

    /// Whether `value` can stand in a JSON string as it is (letters, digits, `-`, `_`, `.`, `:`).
    private static func isPlain(_ value: String) -> Bool {
        value.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
                || byte == UInt8(ascii: ":")
        }
    }

    /// One write per line, so that lines of concurrent workers do not interleave: straight to the descriptor (a
    /// line a worker logs costs no `Data` and no `FileHandle` on the way), and a gone reader is not an error here.
    private static func write(_ bytes: [UInt8]) {
        StandardStreams.writeAll(bytes, to: STDERR_FILENO)
    }
}

import Codecs
import Foundation

/// Forwards a function's stderr to the gateway's, one JSON line per line, tagged with the function and request.
struct StderrForwarder: Sendable {
    let function: String

    func forward(_ line: String, requestID: String?) {
        guard !line.isEmpty else { return }
        var members: [String: JSONValue]
        if let object = (try? JSONValue.parse(line))?.objectValue {
            members = object
        } else {
            members = ["level": .string("info"), "msg": .string(line)]
        }
        members["function"] = members["function"] ?? .string(function)
        if let requestID, members["requestId"] == nil { members["requestId"] = .string(requestID) }
        members["source"] = .string("function")
        let encoder = JSONCoding.encoder()
        guard let data = try? encoder.encode(JSONValue.object(members)) else { return }
        FileHandle.standardError.write(data + Data("\n".utf8))
    }
}

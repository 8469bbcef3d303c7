// swift-trivial plus FoundationEssentials' JSON: decodes the register event's body shape from stdin and encodes an
// answer, as a function's coders do.
import FoundationEssentials

struct Registration: Codable {
    var token: String
    var platform: String
    var environment: String
}

let input = Array((readLine() ?? "").utf8)
let registration = try? JSONDecoder().decode(Registration.self, from: Data(input))
let answer = try JSONEncoder().encode(["deviceId": UUID().uuidString, "platform": registration?.platform ?? ""])
print(String(decoding: answer, as: UTF8.self))

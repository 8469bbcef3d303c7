import Codecs
import FunctionRuntime
import Testing

/// The event and the response are written directly (`JSONSerializable`), not through Foundation's encoder: the bytes
/// must stay the encoder's, whichever optional members are set and whatever their text holds.
@Suite("the API Gateway event and response written without the encoder")
struct APIGatewayJSONTests {
    static let texts = ["", "a/b", "q\"uo\\te", "line\nbreak\t\u{1}", "é日😀\u{2028}", "$default", "POST /v1/x"]

    /// Member `bit` of combination `index` is set or absent: a spread of the 2^26 combinations, the same every run.
    static func isSet(_ index: Int, _ bit: Int) -> Bool {
        ((UInt64(index) &* 2_654_435_761 &+ UInt64(bit) &* 40_503) >> 7) & 1 == 1
    }

    static func text(_ index: Int, _ bit: Int) -> String? {
        isSet(index, bit) ? texts[(index + bit) % texts.count] : nil
    }

    static func map(_ index: Int, _ bit: Int) -> [String: String]? {
        guard isSet(index, bit) else { return nil }
        let members = (0..<(index % 4)).map { ("k\($0)\(texts[$0])", texts[($0 + index) % texts.count]) }
        return Dictionary(uniqueKeysWithValues: members)
    }

    static func event(_ index: Int) -> APIGatewayV2Request {
        var http = APIGatewayV2Request.RequestContext.HTTP(
            method: text(index, 0), path: text(index, 1), sourceIp: text(index, 2), userAgent: text(index, 3))
        http.protocol = text(index, 4)
        var context = APIGatewayV2Request.RequestContext(
            requestId: text(index, 5), routeKey: text(index, 6),
            timeEpoch: isSet(index, 7) ? 1_764_000_000_000 + Int64(index) : nil, http: isSet(index, 8) ? http : nil)
        context.accountId = text(index, 9)
        context.apiId = text(index, 10)
        context.domainName = text(index, 11)
        context.domainPrefix = text(index, 12)
        context.stage = text(index, 13)
        context.time = text(index, 14)
        var event = APIGatewayV2Request(
            routeKey: text(index, 15), rawPath: text(index, 16), headers: map(index, 17),
            requestContext: isSet(index, 18) ? context : nil, body: text(index, 19),
            isBase64Encoded: isSet(index, 20) ? isSet(index, 21) : nil)
        event.version = text(index, 22)
        event.rawQueryString = text(index, 23)
        event.cookies = isSet(index, 24) ? Array(texts.prefix(index % 3)) : nil
        event.queryStringParameters = map(index, 25)
        event.pathParameters = map(index, 26)
        return event
    }

    @Test("an event: the encoder's bytes, for every combination of set and absent members tried")
    func event() throws {
        for index in 0..<600 {
            let event = Self.event(index)
            let expected = try Array(JSONCoding.encoder().encode(event))
            #expect(JSONCoding.encode(event) == expected, "combination \(index)")
        }
    }

    @Test("a response: the encoder's bytes")
    func response() throws {
        for (index, body) in Self.texts.enumerated() {
            let response = APIGatewayV2Response(
                statusCode: [200, 201, 400, 503][index % 4], headers: Self.map(index, 1) ?? [:], body: body,
                isBase64Encoded: index % 2 == 0)
            let expected = try Array(JSONCoding.encoder().encode(response))
            #expect(JSONCoding.encode(response) == expected, "response \(index)")
        }
    }
}

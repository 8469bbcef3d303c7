import Codecs
import FunctionRuntime
@testable import FunctionGateway
import Foundation
import HTTPTypes
import Testing
import TestSupport

/// The gateway's events are FunctionRuntime's own types, and the functions read them back with their strict parser:
/// what API Gateway would send, member by member.
@Suite("the gateway's events")
struct GatewayEventTests {
    static let now = Date(timeIntervalSince1970: 1_795_000_000.123)

    static func event(query: String = "", headers: HTTPFields, body: [UInt8]) throws -> APIGatewayV2Request {
        let bytes = EventBuilder.event(
            method: "POST", path: "/api/dose-records", query: query, headers: headers, body: body,
            sourceIP: "192.0.2.7", routeKey: "POST /api/dose-records", requestID: "req-1", now: now)
        return try APIGatewayV2Request(parsing: bytes)
    }

    @Test("an HTTP request becomes a 2.0 event: headers lower-case and comma-joined, cookies apart, query parsed")
    func httpEvent() throws {
        var headers = HTTPFields()
        headers.append(HTTPField(name: HTTPField.Name("X-Trace")!, value: "a"))
        headers.append(HTTPField(name: HTTPField.Name("x-trace")!, value: "b"))
        headers.append(HTTPField(name: .cookie, value: "s=1; t=2"))
        headers.append(HTTPField(name: .contentType, value: "application/json"))
        headers.append(HTTPField(name: .userAgent, value: "curl/8"))
        headers.append(HTTPField(name: HTTPField.Name("Host")!, value: "api.example"))
        let event = try Self.event(query: "a=1&a=2&b=x+y%21", headers: headers, body: Array(#"{"k":1}"#.utf8))
        #expect(event.version == "2.0" && event.routeKey == "POST /api/dose-records")
        #expect(event.rawPath == "/api/dose-records" && event.rawQueryString == "a=1&a=2&b=x+y%21")
        #expect(event.headers?["x-trace"] == "a,b" && event.headers?["cookie"] == nil)
        #expect(event.cookies == ["s=1", "t=2"])
        #expect(event.queryStringParameters == ["a": "1,2", "b": "x y!"])
        #expect(event.body == #"{"k":1}"# && event.isBase64Encoded == false)
        let context = try #require(event.requestContext)
        #expect(context.requestId == "req-1" && context.routeKey == "POST /api/dose-records")
        #expect(context.stage == "$default" && context.accountId == "anonymous" && context.apiId == "local")
        #expect(context.domainName == "api.example" && context.timeEpoch == 1_795_000_000_123)
        #expect(context.time == EventBuilder.accessLogTime(Self.now))
        #expect(context.http?.method == "POST" && context.http?.path == "/api/dose-records")
        #expect(context.http?.sourceIp == "192.0.2.7" && context.http?.userAgent == "curl/8")
        #expect(context.http?.protocol == "HTTP/1.1")
    }

    @Test("no query, no cookies, no body: those members are absent; a binary body travels as base64")
    func optionalMembers() throws {
        let empty = try Self.event(headers: HTTPFields(), body: [])
        #expect(empty.cookies == nil && empty.queryStringParameters == nil && empty.body == nil)
        #expect(empty.rawQueryString == "" && empty.isBase64Encoded == false)
        #expect(empty.requestContext?.domainName == "localhost")
        var binary = HTTPFields()
        binary[.contentType] = "application/octet-stream"
        let event = try Self.event(headers: binary, body: [0xff, 0x00, 0x41])
        #expect(event.isBase64Encoded == true && event.body == Data([0xff, 0x00, 0x41]).base64EncodedString())
    }

    @Test("which bodies travel as text: JSON, XML, text and forms, whatever the case of their media type")
    func textBodies() {
        for type in [
            "application/json", "Application/JSON; charset=utf-8", "application/problem+json", "text/plain",
            "TEXT/HTML", "application/xml", "image/svg+xml", "application/x-www-form-urlencoded",
            "application/javascript",
        ] {
            #expect(EventBuilder.isText(contentType: type), "\(type)")
        }
        #expect(EventBuilder.isText(contentType: nil))
        for type in ["application/octet-stream", "image/png", "", "js", "application/jso", "multipart/form-data"] {
            #expect(!EventBuilder.isText(contentType: type), "\(type)")
        }
    }

    @Test("a scheduled event is EventBridge's Scheduled Event")
    func scheduledEvent() throws {
        let bytes = EventBuilder.scheduledEvent(
            function: "push-sweep", id: "e-1", region: "ap-northeast-1", now: Self.now)
        let event = try #require(try JSONValue.parse(bytes).objectValue)
        #expect(event["detail-type"] == .string("Scheduled Event") && event["source"] == .string("aws.events"))
        #expect(event["id"] == .string("e-1") && event["version"] == .string("0") && event["detail"] == .object([:]))
        #expect(event["account"] == .string("000000000000") && event["region"] == .string("ap-northeast-1"))
        #expect(event["time"] == .string(Timestamp.rfc3339UTC(Date(timeIntervalSince1970: 1_795_000_000))))
        #expect(
            event["resources"] == .array([.string("arn:aws:events:ap-northeast-1:000000000000:rule/push-sweep")]))
        #expect(event.count == 9)
    }
}

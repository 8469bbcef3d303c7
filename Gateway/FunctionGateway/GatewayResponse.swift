import Codecs
import FunctionRuntime
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// Turns what a function returned into the HTTP response, as API Gateway does for payload format 2.0.
enum GatewayResponse {
    /// - Returns: the response, or `nil` when the output is not a usable response (the gateway answers 502).
    static func fromFunctionOutput(_ output: [UInt8], requestID: String) -> Response? {
        guard let document = try? JSONValue.parse(output, maxDepth: 64) else { return nil }
        guard let object = document.objectValue, object["statusCode"] != nil else {
            // A valid JSON value without statusCode is taken as the body of a 200 (API Gateway's rule).
            return make(status: 200, headers: ["content-type": "application/json"], body: output, requestID: requestID)
        }
        guard let status = object["statusCode"]?.integerValue, (100...599).contains(status) else { return nil }
        var headers: [String: String] = [:]
        for (name, value) in object["headers"]?.objectValue ?? [:] {
            if let text = value.stringValue { headers[name.lowercased()] = text }
        }
        var body: [UInt8] = []
        if let text = object["body"]?.stringValue {
            if object["isBase64Encoded"]?.boolValue == true {
                guard let decoded = Data(base64Encoded: text) else { return nil }
                body = Array(decoded)
            } else {
                body = Array(text.utf8)
            }
        }
        let cookies = (object["cookies"]?.arrayValue ?? []).compactMap(\.stringValue)
        return make(status: Int(status), headers: headers, body: body, requestID: requestID, cookies: cookies)
    }

    /// A problem+json response from the gateway itself (404, 405, 413, 502, 503, 504): the document a function would
    /// write for it (``APIGatewayV2Response/problem(_:requestID:)``, FunctionRuntime's one renderer), turned into
    /// HTTP by the same code as a function's output.
    static func problem(_ problem: Problem, requestID: String) -> Response {
        let document = APIGatewayV2Response.problem(problem, requestID: requestID)
        if let output = JSONCoding.encode(document), let response = fromFunctionOutput(output, requestID: requestID) {
            return response
        }
        // Unreachable: the document is always a valid response. A bare status rather than a crash.
        return make(status: problem.status, headers: [:], body: [], requestID: requestID)
    }

    /// The 413 for a body over the function's limit. The connection closes after it (`connection: close`): what the
    /// client still sends of the body is never read into memory, only discarded until the socket closes.
    static func refusedBody(limit: Int, requestID: String) -> Response {
        var response = problem(.payloadTooLarge(limit: limit), requestID: requestID)
        response.headers[.connection] = "close"
        return response
    }

    static func make(
        status: Int, headers: [String: String], body: [UInt8], requestID: String, cookies: [String] = []
    ) -> Response {
        var fields = HTTPFields()
        for (name, value) in headers {
            guard let field = HTTPField.Name(name), name != "content-length", name != "transfer-encoding" else {
                continue
            }
            fields[field] = value
        }
        for cookie in cookies { fields.append(HTTPField(name: .setCookie, value: cookie)) }
        fields[HTTPField.Name("x-request-id")!] = requestID
        return Response(status: .init(code: status), headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}

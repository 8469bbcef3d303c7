import Codecs

// The event and the response as JSON values, written directly by `JSONCoding.encode` (the gateway writes an event
// and every function a response per invocation). Each mirrors the type's synthesized `Encodable`: the same member
// names, an absent optional left out; `JSONSerializationTests` holds the bytes to the encoder's.

extension APIGatewayV2Request: JSONSerializable {
    public var jsonValue: JSONValue {
        var members: [String: JSONValue] = [:]
        members["version"] = version.map(JSONValue.string)
        members["routeKey"] = routeKey.map(JSONValue.string)
        members["rawPath"] = rawPath.map(JSONValue.string)
        members["rawQueryString"] = rawQueryString.map(JSONValue.string)
        members["cookies"] = cookies.map { .array($0.map(JSONValue.string)) }
        members["headers"] = headers.map(Self.object)
        members["queryStringParameters"] = queryStringParameters.map(Self.object)
        members["pathParameters"] = pathParameters.map(Self.object)
        members["requestContext"] = requestContext?.jsonValue
        members["body"] = body.map(JSONValue.string)
        members["isBase64Encoded"] = isBase64Encoded.map(JSONValue.bool)
        return .object(members)
    }

    private static func object(_ strings: [String: String]) -> JSONValue {
        .object(strings.mapValues(JSONValue.string))
    }
}

extension APIGatewayV2Request.RequestContext: JSONSerializable {
    public var jsonValue: JSONValue {
        var members: [String: JSONValue] = [:]
        members["accountId"] = accountId.map(JSONValue.string)
        members["apiId"] = apiId.map(JSONValue.string)
        members["domainName"] = domainName.map(JSONValue.string)
        members["domainPrefix"] = domainPrefix.map(JSONValue.string)
        members["requestId"] = requestId.map(JSONValue.string)
        members["routeKey"] = routeKey.map(JSONValue.string)
        members["stage"] = stage.map(JSONValue.string)
        members["time"] = time.map(JSONValue.string)
        members["timeEpoch"] = timeEpoch.map { .number(Double($0)) }
        members["http"] = http?.jsonValue
        return .object(members)
    }
}

extension APIGatewayV2Request.RequestContext.HTTP: JSONSerializable {
    public var jsonValue: JSONValue {
        var members: [String: JSONValue] = [:]
        members["method"] = method.map(JSONValue.string)
        members["path"] = path.map(JSONValue.string)
        members["protocol"] = `protocol`.map(JSONValue.string)
        members["sourceIp"] = sourceIp.map(JSONValue.string)
        members["userAgent"] = userAgent.map(JSONValue.string)
        return .object(members)
    }
}

extension APIGatewayV2Response: JSONSerializable {
    public var jsonValue: JSONValue {
        .object([
            "statusCode": .number(Double(statusCode)),
            "headers": .object(headers.mapValues(JSONValue.string)),
            "body": .string(body),
            "isBase64Encoded": .bool(isBase64Encoded),
        ])
    }
}

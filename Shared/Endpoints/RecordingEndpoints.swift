/// The three recording endpoints (SPEC §6). Their behaviour arrives with the dose-recording issue; until then each
/// answers a 501 problem after authenticating, so that the function table, the runner and the deployment
/// descriptors can already name them.
public struct DoseRecord: Endpoint {
    public let functionName = "dose-record"
    public let method = "POST"
    public init() {}

    public func handle(_ request: FunctionRequest, context: InvocationContext) throws -> EndpointResponse {
        _ = try Authenticator(configuration: context.configuration).authenticate(request, context: context)
        throw Problem.notImplemented("Recording a scheduled dose is not available yet.")
    }
}

public struct SlotBulkRecord: Endpoint {
    public let functionName = "slot-bulk-record"
    public let method = "POST"
    public init() {}

    public func handle(_ request: FunctionRequest, context: InvocationContext) throws -> EndpointResponse {
        _ = try Authenticator(configuration: context.configuration).authenticate(request, context: context)
        throw Problem.notImplemented("Recording a slot is not available yet.")
    }
}

public struct PrnRecord: Endpoint {
    public let functionName = "prn-record"
    public let method = "POST"
    public init() {}

    public func handle(_ request: FunctionRequest, context: InvocationContext) throws -> EndpointResponse {
        _ = try Authenticator(configuration: context.configuration).authenticate(request, context: context)
        throw Problem.notImplemented("Recording an as-needed dose is not available yet.")
    }
}

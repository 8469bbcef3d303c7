@testable import Codecs
@testable import OpenSSLCrypto
@testable import JOSE
@testable import FunctionRuntime
// The invariants the libFuzzer harnesses assert, one check per fuzz target.
//
// This one file is compiled twice: into the fuzz package's `FuzzChecks` module, and (through a symbolic link) into
// the root package's test target, whose `FuzzRegressionTests` replays every seed and regression input through the
// same checks. So a fuzz target's `Harness.swift` only copies libFuzzer's bytes and calls a check, and nothing
// about what counts as a bug is written down twice.
import Foundation
import Logging

@testable import CaregiverPush

/// An input made a harness's invariant fail. Never about an expected rejection: those are the normal outcome.
public struct InvariantViolation: Error, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// The fixed world the harnesses and their seeds live in, so that a seed stays meaningful across runs.
public enum FuzzFixture {
    /// The caregiver-token HS256 secret (fuzzing only; it protects nothing).
    public static let hs256Secret = "fuzz-only-hs256-secret-that-protects-nothing-0123"
    /// The configured issuer: seeds carry it, and the verifier checks it, so the `iss` rule is exercised too.
    public static let issuer = "https://fuzz.supabase.co/auth/v1"
    /// Every invocation's clock reading: tokens and dates in the seeds are valid at this instant.
    public static let now = Date(timeIntervalSince1970: 1_750_000_000)  // 2025-06-15T15:06:40Z
    public static let caregiverID = UUID(uuid: (0xC4, 0x4E, 0x91, 0x7E, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 1))
    public static let patientID = UUID(uuid: (0x9A, 0x71, 0xE4, 0x70, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 2))
    /// `Keys/jwks.json` (an RS256 and an ES256 public key, generated once) in the fuzz package at `root`.
    public static func jwksFile(fuzzPackageRoot root: URL) -> URL {
        root.appendingPathComponent("Keys/jwks.json")
    }

    /// A logger that drops everything: a log line per input would cost more than the input.
    static let silentLogger = Logger(label: "fuzz") { _ in SwiftLogNoOpLogHandler() }
}

// MARK: - envelope

/// The `envelope` target: raw bytes as a function's stdin → ``EndpointHandler/handle(_:writer:)``.
///
/// Invariants: the response always comes back (no crash, no trap) with one of the statuses the envelope and the
/// validators produce — never a 500, since configuration is complete and nothing can fail; `x-request-id` is
/// short and printable, and is the event's own id when it has a usable one; `cache-control` is `no-store`; a problem is `application/problem+json` whose body
/// repeats the status and has a `/problems/…` type, a title and a detail (405 also `Allow: POST`, a validation
/// 422 at least one field error); a success is `{"ok":true}`; and the host can serialise the response.
public enum EnvelopeCheck {
    static let configuration = Configuration(environment: [
        // Never connected to: ``ValidationOnlyEndpoint`` stops before the first SQL statement.
        "DATABASE_URL": "postgresql://fuzz.invalid/never-connected",
        "SUPABASE_JWT_SECRET": FuzzFixture.hs256Secret,
        "PUSH_ENVIRONMENT": "DEV",
    ])
    static let possibleStatuses: Set<Int> = [200, 400, 404, 405, 413, 415, 422]

    public static func check(_ event: [UInt8]) throws(InvariantViolation) {
        let handler = EndpointHandler(
            ValidationOnlyEndpoint(),
            service: CaregiverService(configuration: configuration, logger: FuzzFixture.silentLogger))
        var responses: [APIGatewayV2Response] = []
        let writer = ResponseWriter<APIGatewayV2Response>.inMemory(logger: FuzzFixture.silentLogger) {
            responses.append($0)
        }
        handler.handle(InvocationInput(eventBytes: event, now: FuzzFixture.now), writer: writer)
        guard let response = responses.first, responses.count == 1 else {
            throw InvariantViolation("\(responses.count) responses to one invocation")
        }
        let status = response.statusCode
        guard possibleStatuses.contains(status) else {
            throw InvariantViolation("status \(status) (an unexpected error, or a validator postcondition failed)")
        }
        guard response.headers["cache-control"] == "no-store" else { throw InvariantViolation("no cache-control") }
        guard let requestID = response.headers["x-request-id"], isUsableRequestID(requestID) else {
            throw InvariantViolation("x-request-id missing, too long or not printable")
        }
        // The README's contract: the event's requestContext.requestId when usable, else its x-request-id header —
        // for an event the function reads (its own strict parser: a lax decoder takes events it refuses, such as one
        // with a member given twice, which are answered 400 under an id of the function's own).
        if let event = try? APIGatewayV2Request(parsing: event),
            let expected = [event.requestContext?.requestId, event.headerValue("x-request-id")]
                .compactMap({ $0 }).first(where: isUsableRequestID),
            requestID != expected
        {
            throw InvariantViolation("x-request-id is not the event's request id")
        }
        guard let body = try? JSONValue.parse(response.body), body.objectValue != nil else {
            throw InvariantViolation("status \(status): the body is not a JSON object")
        }
        if status == 200 {
            guard response.headers["content-type"] == "application/json", body == .object(["ok": .bool(true)]) else {
                throw InvariantViolation("200 without a JSON {\"ok\":true} body")
            }
        } else {
            try checkProblem(body, status: status, headers: response.headers)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let line = try? encoder.encode(response), (try? JSONValue.parse(Array(line))) != nil else {
            throw InvariantViolation("the response cannot be written as the host writes it")
        }
    }

    /// Short, printable, and safe inside a quoted log field.
    private static func isUsableRequestID(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.count <= 128
            && value.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
    }

    private static func checkProblem(
        _ body: JSONValue, status: Int, headers: [String: String]
    ) throws(InvariantViolation) {
        guard headers["content-type"] == "application/problem+json" else {
            throw InvariantViolation("status \(status) is not application/problem+json")
        }
        guard body["status"] == .number(Double(status)), body["type"]?.stringValue?.hasPrefix("/problems/") == true,
            body["title"]?.stringValue?.isEmpty == false, body["detail"]?.stringValue?.isEmpty == false
        else { throw InvariantViolation("status \(status): problem body lacks status, type, title or detail") }
        if status == 405, headers["allow"] != "POST" { throw InvariantViolation("405 without Allow: POST") }
        if body["type"] == .string("/problems/validation") {
            guard let errors = body["errors"]?.arrayValue, !errors.isEmpty,
                errors.allSatisfy({ $0["field"]?.stringValue != nil && $0["message"]?.stringValue != nil })
            else { throw InvariantViolation("a validation problem without field errors") }
        }
    }
}

/// Stands in for the five endpoints in the `envelope` target: routes on the path as the function table does and
/// runs all the real endpoint runs before its first SQL statement — except verifying the bearer token (the
/// `token-verifier` target covers it, and a patient session needs the database). The principal's kind follows
/// the token's form, so patient and caregiver validation are both reached.
struct ValidationOnlyEndpoint: Endpoint {
    /// A stand-in for all five: the log's `function` is push-register's.
    static let function = FunctionName.pushRegister
    let method = "POST"

    /// A validator postcondition failed: not a problem, so the envelope answers 500 and the check reports it.
    struct PostconditionFailure: Error {}

    func handle(
        _ request: FunctionRequest, context: InvocationContext, writer: EndpointWriter<OKBody>
    ) throws -> Responded {
        guard let route = FuzzRoute(path: request.path) else { throw Problem.notFound("No such route.") }
        let token = Authenticator.bearerToken(request.header("authorization"))
        let isPatient = token?.hasPrefix(PatientSessionToken.prefix) == true
        let broken = try route.validate(
            RequestBody(request), idempotencyKey: request.header("idempotency-key"),
            principal: isPatient
                ? .patient(id: AppID(FuzzFixture.patientID), sessionID: AppID(FuzzFixture.patientID))
                : .caregiver(id: FuzzFixture.caregiverID),
            now: context.now)
        guard broken.isEmpty else { throw PostconditionFailure() }
        return try writer.respond(OKBody())
    }
}

// MARK: - validators

/// The endpoints whose bodies are validated, in the order the `validators` target's selector byte names them.
enum FuzzRoute: CaseIterable {
    case pushRegister, pushUnregister, doseRecord, slotBulkRecord, prnRecord

    init?(path: String) {
        switch path {
        case "/api/push/register": self = .pushRegister
        case "/api/push/unregister": self = .pushUnregister
        case "/api/dose-records": self = .doseRecord
        case "/api/dose-records/slot": self = .slotBulkRecord
        case "/api/prn-dose-records": self = .prnRecord
        default: return nil
        }
    }

    /// The field names a 422 of this endpoint may name.
    var fields: Set<String> {
        switch self {
        case .pushRegister: ["token", "platform", "environment", "installationId"]
        case .pushUnregister: ["token"]
        case .doseRecord: ["patientId", "medicationId", "scheduledAt", "takenAt"]
        case .slotBulkRecord: ["patientId", "date", "slot", "takenAt"]
        case .prnRecord: ["patientId", "medicationId", "takenAt", "quantity", "Idempotency-Key"]
        }
    }

    /// Runs the endpoint's own validation.
    /// - Returns: the postconditions an accepted body broke (empty when all hold).
    /// - Throws: the endpoint's ``Problem``.
    func validate(
        _ body: RequestBody, idempotencyKey: String?, principal: Principal, now: Date
    ) throws(Problem) -> [String] {
        var isCaregiver = false
        if case .caregiver = principal { isCaregiver = true }
        let latestTakenAt = now.addingTimeInterval(DoseRules.takenAtFutureTolerance)
        var broken: [String] = []
        func require(_ condition: Bool, _ rule: String) {
            if !condition { broken.append(rule) }
        }
        switch self {
        case .pushRegister:
            let registration = try PushRegister.validate(body)
            require(Self.isDeviceToken(registration.token), "token is 1–512 token characters")
            let installationID = Array((registration.installationID ?? "absent").utf8)
            require(
                (1...128).contains(installationID.count) && installationID.allSatisfy { $0 > 0x20 && $0 < 0x7F },
                "installationId is 1–128 printable characters")
        case .pushUnregister:
            require(Self.isDeviceToken(try PushUnregister.validate(body)), "token is 1–512 token characters")
        case .doseRecord:
            let fields = try DoseRecord.validate(body, principal: principal, now: now)
            require(!isCaregiver || fields.patientID != nil, "a caregiver names the patient")
            require(fields.takenAt <= latestTakenAt, "takenAt is at most 5 minutes ahead")
            require(
                DoseRules.isAcceptableTakenAt(fields.takenAt, now: now, scheduledAt: fields.scheduledAt),
                "takenAt is in its plausible window")
            require(FieldValidator.instantRange.contains(fields.scheduledAt), "scheduledAt is within 1970–2999")
        case .slotBulkRecord:
            let fields = try SlotBulkRecord.validate(body, principal: principal, now: now)
            require(!isCaregiver || fields.patientID != nil, "a caregiver names the patient")
            require(!DoseRules.isFutureDate(fields.date, now: now), "date is not after today")
            require(fields.date.year >= 1970, "date is from 1970 on")
            require(fields.takenAt <= latestTakenAt, "takenAt is at most 5 minutes ahead")
            require(DoseRules.isAcceptableTakenAt(fields.takenAt, now: now), "takenAt is in its plausible window")
        case .prnRecord:
            let fields = try PrnRecord.validate(body, idempotencyKey: idempotencyKey, principal: principal, now: now)
            require(!isCaregiver || fields.patientID != nil, "a caregiver names the patient")
            require((1...10).contains(fields.quantity.value), "quantity is 1–10")
            require((idempotencyKey == nil) == (fields.idempotencyKey == nil), "a sent Idempotency-Key is kept")
            require(fields.takenAt.date <= latestTakenAt, "takenAt is at most 5 minutes ahead")
            require(DoseRules.isAcceptableTakenAt(fields.takenAt.date, now: now), "takenAt is in its plausible window")
        }
        return broken
    }

    private static func isDeviceToken(_ token: String) -> Bool {
        (1...512).contains(token.utf8.count) && token.utf8.allSatisfy(FieldValidator.isTokenCharacter)
    }
}

/// The `validators` target: one selector byte, then a request body → ``RequestBody`` → the endpoint's validation.
///
/// The selector's low three bits pick the endpoint (modulo five), bit 3 a patient instead of a caregiver, bits
/// 4–5 the `Idempotency-Key` header (none, a UUID, not a UUID). Invariants: a body is accepted or refused with a
/// ``Problem`` of 400, 413, 415 or 422 — a 422 naming only fields of that endpoint; an accepted body meets the
/// postconditions of ``FuzzRoute/validate(_:idempotencyKey:principal:now:)``; and a body the strict parser accepts
/// survives encoding and re-parsing unchanged.
public enum ValidatorCheck {
    public static func check(_ input: [UInt8]) throws(InvariantViolation) {
        guard let selector = input.first else { return }
        let route = FuzzRoute.allCases[Int(selector & 0x07) % FuzzRoute.allCases.count]
        let principal: Principal =
            selector & 0x08 == 0
            ? .caregiver(id: FuzzFixture.caregiverID)
            : .patient(id: AppID(FuzzFixture.patientID), sessionID: AppID(FuzzFixture.patientID))
        let idempotencyKey: String? =
            switch (selector >> 4) & 0x03 {
            case 1: "5F0E7B0C-3C57-4E1A-9D0B-1B2C3D4E5F60"
            case 2: "not-a-uuid"
            default: nil
            }
        // The body as an event carries any bytes (base64), through the same checks as a function's request.
        let event = APIGatewayV2Request(
            headers: ["content-type": "application/json"], body: Data(input.dropFirst()).base64EncodedString(),
            isBase64Encoded: true)
        do {
            let request = try FunctionRequest(
                event: event, method: "POST", requestID: "fuzz",
                bodyLimit: EndpointHandler<ValidationOnlyEndpoint>.bodyLimit)
            let body = try RequestBody(request)
            try checkRoundTrip(body)
            let broken = try route.validate(
                body, idempotencyKey: idempotencyKey, principal: principal, now: FuzzFixture.now)
            guard broken.isEmpty else {
                throw InvariantViolation("\(route): accepted, but broke: \(broken.joined(separator: "; "))")
            }
        } catch let problem as Problem {
            guard [400, 413, 415, 422].contains(problem.status) else {
                throw InvariantViolation("\(route): refused with status \(problem.status)")
            }
            let named = Set((problem.errors ?? []).map(\.field))
            guard named.isSubset(of: route.fields) else {
                throw InvariantViolation(
                    "\(route): a 422 names unknown fields \(named.subtracting(route.fields).sorted())")
            }
            if problem.type == "/problems/validation", problem.errors?.isEmpty != false {
                throw InvariantViolation("\(route): a validation problem without field errors")
            }
        } catch let violation as InvariantViolation {
            throw violation
        } catch {
            throw InvariantViolation("\(route): unexpected \(type(of: error))")
        }
    }

    /// What the strict parser accepted, `JSONEncoder` can write, and reading that back gives the same value.
    private static func checkRoundTrip(_ body: RequestBody) throws(InvariantViolation) {
        let value = JSONValue.object(body.members)
        guard let encoded = try? JSONEncoder().encode(value) else {
            throw InvariantViolation("an accepted body cannot be encoded")
        }
        guard let reparsed = try? JSONValue.parse(Array(encoded)), reparsed == value else {
            throw InvariantViolation("an accepted body does not survive encoding and re-parsing")
        }
    }
}

// MARK: - token-verifier

/// The `token-verifier` target: bytes as the text after `Bearer ` → ``CaregiverTokenVerifier/verify(_:now:)``,
/// with a fixed HS256 secret, the fixed JWKS and the fixed issuer.
///
/// Invariants: verifying is deterministic (twice, same answer), and a token is accepted only when an independent
/// re-check agrees — the signature verifies with the key its `kid` names (or the HS256 secret) under that key's
/// algorithm, and the claims, read with Foundation's `JSONSerialization` rather than the strict parser, are
/// within `exp`/`nbf` (with the leeway), for `authenticated`, by the configured issuer, not anonymous, and
/// about the `sub` the verifier returned.
///
/// Not `Sendable`: it holds the verifier and the key set, which own OpenSSL handles.
public final class TokenCheck {
    private let verifier: CaregiverTokenVerifier
    private let jwks: JWKS
    private let secret = Array(FuzzFixture.hs256Secret.utf8)

    /// - Throws: when the key set does not parse (a broken fixture, not a finding).
    public init(jwksJSON: String) throws {
        jwks = try JWKS(json: jwksJSON)
        verifier = CaregiverTokenVerifier(hs256Secret: secret, jwks: jwks, issuer: FuzzFixture.issuer)
    }

    /// Verifies `input`, read as UTF-8 (invalid sequences repaired, as a header value would arrive), as a token.
    public func verify(_ input: [UInt8]) -> Result<CaregiverIdentity, TokenRejection> {
        let token = String(decoding: input, as: UTF8.self)
        return Result { () throws(TokenRejection) in try verifier.verify(token, now: FuzzFixture.now) }
    }

    public func check(_ input: [UInt8]) throws(InvariantViolation) {
        let first = verify(input)
        guard verify(input) == first else { throw InvariantViolation("two verifications of one token disagree") }
        if case .success(let identity) = first {
            try confirmAcceptance(String(decoding: input, as: UTF8.self), identity: identity)
        }
    }

    private func confirmAcceptance(_ token: String, identity: CaregiverIdentity) throws(InvariantViolation) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard token.utf8.count <= CaregiverTokenVerifier.maximumTokenLength, parts.count == 3,
            let headerBytes = Base64URL.decode(parts[0]), let payloadBytes = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2]),
            let header = (try? JSONSerialization.jsonObject(with: Data(headerBytes))) as? [String: Any],
            let claims = (try? JSONSerialization.jsonObject(with: Data(payloadBytes))) as? [String: Any],
            let algorithm = header["alg"] as? String, header["crit"] == nil
        else { throw InvariantViolation("accepted a token that is not three segments of JSON objects with an alg") }
        let signingInput = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        let signatureVerifies: Bool
        if let keyID = header["kid"] as? String, let key = jwks.key(id: keyID) {
            signatureVerifies =
                algorithm == key.algorithm.rawValue
                && key.publicKey.verify(signature: signature, message: signingInput, algorithm: key.algorithm)
        } else {
            signatureVerifies =
                algorithm == "HS256"
                && HMACSHA256.authenticationCode(key: secret, message: signingInput) == signature
        }
        guard signatureVerifies else { throw InvariantViolation("accepted a token whose signature does not verify") }

        let now = FuzzFixture.now.timeIntervalSince1970
        let leeway = CaregiverTokenVerifier.leeway
        guard let expiry = (claims["exp"] as? NSNumber)?.doubleValue, now <= expiry + leeway,
            identity.expiresAt == Date(timeIntervalSince1970: expiry)
        else { throw InvariantViolation("accepted an expired token, or one without exp") }
        if let notBefore = claims["nbf"] {
            guard let value = (notBefore as? NSNumber)?.doubleValue, now + leeway >= value else {
                throw InvariantViolation("accepted a token before its nbf")
            }
        }
        let audiences = (claims["aud"] as? String).map { [$0] } ?? (claims["aud"] as? [String]) ?? []
        guard audiences.contains("authenticated"), claims["role"] as? String == "authenticated",
            claims["iss"] as? String == FuzzFixture.issuer, (claims["is_anonymous"] as? Bool) != true,
            let subject = claims["sub"] as? String, UUID(uuidString: subject) == identity.userID
        else { throw InvariantViolation("accepted a token whose aud, role, iss, is_anonymous or sub is wrong") }
    }
}

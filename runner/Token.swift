import JOSE
import ArgumentParser
import Foundation

/// `runner token`: a caregiver access token signed with `SUPABASE_JWT_SECRET` (HS256), or with the dev stack's
/// ES256 key in `.data/` (`--algorithm ES256`), for local development only.
struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a caregiver token: HS256 with SUPABASE_JWT_SECRET, or ES256 with `runner dev`'s key.",
        discussion: """
            Environment: SUPABASE_JWT_SECRET (at least 32 bytes) for HS256. The `make dev` stack's secret lives \
            in .data/dev-jwt-secret: SUPABASE_JWT_SECRET="$(cat .data/dev-jwt-secret)" runner token. Its ES256 key \
            lives in .data/dev-jwt-es256.pem: runner token --algorithm ES256 (run from the repository root).
            """)

    @Option(help: "HS256 (SUPABASE_JWT_SECRET) or ES256 (the key `runner dev` keeps in \(DevSigningKey.file)).")
    var algorithm: String = "HS256"

    @Option(help: "The caregiver's user id (the token's sub); a new one when omitted.")
    var caregiver: String?

    @Option(help: "Lifetime in seconds.")
    var expiresIn: Int = 86_400

    func run() {
        reportingErrors { try start() }
    }

    private func start() throws {
        let subject =
            try caregiver.map { text -> UUID in
                guard let id = UUID(exactly: text) else { throw ValidationError("--caregiver must be a UUID") }
                return id
            } ?? UUID()
        switch algorithm.uppercased() {
        case "HS256":
            guard let secret = ProcessInfo.processInfo.environment["SUPABASE_JWT_SECRET"], !secret.isEmpty else {
                throw ValidationError("SUPABASE_JWT_SECRET is not set")
            }
            let now = Date().timeIntervalSince1970.rounded(.down)
            print(
                try JWTSigner.sign(
                    claims: DevSigningKey.claims(subject: subject, issuedAt: now, expiresIn: expiresIn),
                    using: .hmac(secret: Array(secret.utf8))))
        case "ES256":
            let key: DevSigningKey
            do {
                key = try DevSigningKey(create: false)
            } catch {
                throw ValidationError("no dev signing key in \(DevSigningKey.file): run `runner dev` once first")
            }
            print(try key.caregiverToken(subject: subject, expiresIn: expiresIn))
        default:
            throw ValidationError("--algorithm must be HS256 or ES256")
        }
    }
}

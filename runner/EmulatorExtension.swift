import OpenSSLCrypto
import CaregiverPush
import FunctionGateway
import FCMEmulator
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle

/// The FCM emulator beside the gateway (`runner serve --fcm-emulator`, `runner dev`): its inspection routes on the
/// public port, its TLS + HTTP/2 port on loopback, and the functions' environment pointed at it with a throwaway
/// service account. The production gateway never has it (``GatewayExtension``).
struct EmulatorExtension: GatewayExtension {
    /// The emulator's throwaway key: the runner signs nothing with it, the functions do.
    struct ServiceAccountKey: Sendable {
        let clientEmail: String
        let keyID: String
        let privateKeyPEM: String
    }

    let emulator: FCMEmulator
    let key: ServiceAccountKey
    /// The TLS + HTTP/2 port's throwaway CA and certificate: the functions talk to FCM over it, as in production; the
    /// plain port keeps the inspection routes (`/_emulator/fcm/…`) for curl.
    let certificates: EmulatorCertificates
    /// `runner dev`: the functions fetch the demo's JWKS from the emulator's TLS port (`SUPABASE_JWKS_URL`).
    let demoJWKS: Bool
    private let tlsPort = AsyncStream<Int>.makeStream()

    init(demoJWKS: Bool = false) throws {
        let privateKey = try PrivateKey.generateRSA()
        key = ServiceAccountKey(
            clientEmail: "runner-\(UUID().uuidString.prefix(8).lowercased())@local-emulator.iam.gserviceaccount.com",
            keyID: UUID().uuidString.lowercased(), privateKeyPEM: try privateKey.pemPKCS8())
        emulator = FCMEmulator(
            account: .init(
                projectID: "local-emulator", clientEmail: key.clientEmail, privateKeyID: key.keyID,
                publicKeyPEM: try privateKey.publicKeyPEM()))
        certificates = try EmulatorCertificates.make(
            in: NSTemporaryDirectory() + "runner-fcm-tls-\(UUID().uuidString.prefix(8).lowercased())",
            host: "127.0.0.1")
        self.demoJWKS = demoJWKS
    }

    func addRoutes(to router: Router<GatewayContext>) {
        // The public port gets the inspection routes only: the JWKS routes stay on the loopback TLS port.
        emulator.addRoutes(to: router, jwksRoutes: false)
    }

    func services(logger: Logger) async throws -> [any Service] {
        let port = tlsPort.continuation
        return [
            try await emulator.application(
                port: 0, transport: .tls(certificates), jwksRoutes: demoJWKS, logger: logger
            ) { bound in
                port.yield(bound)
                port.finish()
            }
        ]
    }

    func functionEnvironment(current: [String: String], logger: Logger) async -> [String: String] {
        var ports = tlsPort.stream.makeAsyncIterator()
        guard let port = await ports.next() else { return [:] }
        // The functions reach the emulator as they reach Google: TLS + HTTP/2, verified against its CA.
        let base = "https://127.0.0.1:\(port)"
        await emulator.bound(tokenURL: base + "/token")
        let keyFile = ServiceAccountKeyFile.json(
            projectID: "local-emulator", clientEmail: key.clientEmail, privateKeyID: key.keyID,
            privateKeyPEM: key.privateKeyPEM, tokenURI: base + "/token")
        var extra = [
            "FCM_SERVICE_ACCOUNT_JSON": Data(keyFile.utf8).base64EncodedString(),
            "FCM_API_BASE_URL": base,
            "SSL_CERT_FILE": certificates.caFile,
        ]
        if demoJWKS { extra["SUPABASE_JWKS_URL"] = base + SupabaseJWKSRoutes.path }
        logger.info(
            "fcm emulator listening over TLS + HTTP/2",
            metadata: ["port": .stringConvertible(port), "tls.ca_file": .string(certificates.caFile)])
        extra["PUSH_ENVIRONMENT"] = current["PUSH_ENVIRONMENT"] ?? "DEV"
        return extra
    }

    func stopped() {
        // The emulator's server key and CA certificate were for this run only.
        certificates.removeDirectory()
    }
}

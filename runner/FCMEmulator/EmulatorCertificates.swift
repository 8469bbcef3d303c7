import Foundation

/// A throwaway certificate authority and the server certificate it signs, made with the `openssl` command when the
/// emulator starts in TLS mode, so that clients verify the emulator exactly as they verify Google: a chain to a
/// trusted root (the client is given `caFile`, e.g. through `SSL_CERT_FILE`) and a name that matches the host.
///
/// The server certificate names only the listening address (an IP SAN such as `127.0.0.1`): a client that reaches
/// the same socket under another name (`localhost`) must fail host-name verification.
public struct EmulatorCertificates: Sendable {
    /// The CA's certificate, PEM: what a client trusts.
    public let caFile: String
    /// The server's certificate, PEM.
    public let certificateFile: String
    /// The server's private key, PEM (never leaves the directory).
    public let privateKeyFile: String

    public enum CertificateError: Error, CustomStringConvertible {
        case opensslFailed(step: String, status: Int32)

        public var description: String {
            switch self {
            case .opensslFailed(let step, let status):
                "openssl failed making the emulator's \(step) (exit \(status)); is the openssl command installed?"
            }
        }
    }

    /// Makes a fresh CA and server certificate in `directory` (created when missing), valid for two days.
    /// - Parameter host: the address the server listens on; an IP address becomes an IP SAN, a name a DNS SAN.
    ///
    /// The directory is made private (0700), and the CA's key is deleted as soon as it has signed the server
    /// certificate: nothing can sign another certificate with it afterwards. ``removeDirectory()`` removes the rest.
    public static func make(in directory: String, host: String) throws -> EmulatorCertificates {
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory)
        let path = { (name: String) in (directory as NSString).appendingPathComponent(name) }
        let isAddress = host.allSatisfy { $0.isNumber || $0 == "." || $0 == ":" }
        let subjectAlternativeName = isAddress ? "IP:\(host)" : "DNS:\(host)"
        try openssl(
            step: "CA",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", path("ca.key"), "-out", path("ca.pem"), "-days", "2",
                "-subj", "/CN=caregiver-push FCM emulator throwaway CA",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            ])
        try openssl(
            step: "server key",
            [
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", path("server.key"), "-out", path("server.csr"), "-subj", "/CN=\(host)",
            ])
        let extensions = path("server.ext")
        try """
        subjectAltName=\(subjectAlternativeName)
        basicConstraints=critical,CA:FALSE
        keyUsage=critical,digitalSignature
        extendedKeyUsage=serverAuth

        """.write(toFile: extensions, atomically: true, encoding: .utf8)
        try openssl(
            step: "server certificate",
            [
                "x509", "-req", "-in", path("server.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
                "-CAcreateserial", "-out", path("server.pem"), "-days", "2", "-extfile", extensions,
            ])
        for leftover in ["ca.key", "ca.srl", "server.csr", "server.ext"] {
            try? FileManager.default.removeItem(atPath: path(leftover))
        }
        return EmulatorCertificates(
            caFile: path("ca.pem"), certificateFile: path("server.pem"), privateKeyFile: path("server.key"))
    }

    /// Removes the directory with the server's key and the certificates (when the emulator stops).
    public func removeDirectory() {
        try? FileManager.default.removeItem(atPath: (caFile as NSString).deletingLastPathComponent)
    }

    private static func openssl(step: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CertificateError.opensslFailed(step: step, status: process.terminationStatus)
        }
    }
}

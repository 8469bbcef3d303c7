import CLibFuzzer
import Foundation
import FuzzChecks
import Synchronization

/// The check, built once: importing the JWKS's keys per input would cost more than verifying. In a `Mutex`
/// because a global must be `Sendable` and the check (OpenSSL handles) is not; libFuzzer calls from one thread.
let tokenCheck = Mutex<TokenCheck?>(loadTokenCheck())

private func loadTokenCheck() -> TokenCheck? {
    // Tests/Fuzz/Sources/FuzzTokenVerifier/Harness.swift → Tests/Fuzz
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    let file = FuzzFixture.jwksFile(fuzzPackageRoot: root)
    guard let json = try? String(contentsOf: file, encoding: .utf8) else { return nil }
    return try? TokenCheck(jwksJSON: json)
}

/// libFuzzer's test function: one input per call. With the entry point below, the only place besides the C
/// bindings where unsafe pointers appear; the bytes are copied into an array at once.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTokenVerifier(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    let failure: String? = tokenCheck.withLock { check in
        guard let check else { return "the key set Tests/Fuzz/Keys/jwks.json cannot be loaded" }
        do {
            try check.check(bytes)
            return nil
        } catch {
            return "\(error)"
        }
    }
    if let failure {
        // A trap is what libFuzzer reports as a crash, writing the input out as an artifact.
        fatalError("token-verifier invariant violated: \(failure)")
    }
    return 0
}

/// The process entry point SwiftPM links as `main` (see CLibFuzzer/shim.h): run libFuzzer's driver.
@_cdecl("FuzzTokenVerifier_main")
public func fuzzTokenVerifierMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv, fuzzTokenVerifier)
}

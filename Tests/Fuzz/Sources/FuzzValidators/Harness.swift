import CLibFuzzer
import FuzzChecks

/// libFuzzer's test function: one input per call. With the entry point below, the only place besides the C
/// bindings where unsafe pointers appear; the bytes are copied into an array at once.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzValidators(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    do {
        try ValidatorCheck.check(bytes)
    } catch {
        // A trap is what libFuzzer reports as a crash, writing the input out as an artifact.
        fatalError("validators invariant violated: \(error)")
    }
    return 0
}

/// The process entry point SwiftPM links as `main` (see CLibFuzzer/shim.h): run libFuzzer's driver.
@_cdecl("FuzzValidators_main")
public func fuzzValidatorsMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv, fuzzValidators)
}

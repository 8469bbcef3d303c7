import Codecs
import Foundation
import Testing

/// A chosen instant as the built functions' clock (docs/development.md#fixed-instant): libfaketime preloaded, its
/// clock started at the instant when the process starts and running on from there.
///
/// Nothing in what ships reads a test variable: the preloaded library replaces glibc's `clock_gettime` itself, as it
/// would for any dynamically linked program (the functions link glibc dynamically, the Swift runtime statically or
/// not). PostgreSQL keeps its own clock, which serves only the outbox's durations.
package enum FixedInstant {
    /// Debian's `libfaketime` (scripts/install-deps.sh installs it).
    package static let library: String? = {
        let candidates = ["x86_64-linux-gnu", "aarch64-linux-gnu"].map { "/usr/lib/\($0)/faketime/libfaketime.so.1" }
        return candidates.first { FileManager.default.isReadableFile(atPath: $0) }
    }()

    /// The variables that start a function's clock at `instant`: `FAKETIME="@YYYY-MM-DD HH:MM:SS"` read in UTC
    /// (whole seconds), the monotonic clock left alone so that deadlines and back-offs stay real.
    package static func environment(at instant: Date) throws -> [String: String] {
        let library = try #require(library, "libfaketime is missing: scripts/install-deps.sh installs it")
        let text = Timestamp.rfc3339UTC(Date(timeIntervalSince1970: instant.timeIntervalSince1970.rounded(.down)))
        let start = text.replacingOccurrences(of: "T", with: " ").replacingOccurrences(of: "Z", with: "")
        return [
            "LD_PRELOAD": library, "FAKETIME": "@\(start)", "TZ": "UTC", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        ]
    }

    /// Under `TEST_AT` (scripts/test.sh) the whole run is shifted: the functions a test starts with an environment of
    /// its own are shifted by the same offset.
    package static var runShift: [String: String] {
        let own = ProcessInfo.processInfo.environment
        guard let offset = own["TEST_FAKETIME"], let library = own["TEST_FAKETIME_LIB"] else { return [:] }
        return ["LD_PRELOAD": library, "FAKETIME": offset, "FAKETIME_DONT_FAKE_MONOTONIC": "1"]
    }
}

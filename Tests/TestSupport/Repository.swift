import Foundation

/// The source checkout the tests run from (found from this file's path), for the tests that read its files.
package enum Repository {
    /// The checkout's root (`Tests/TestSupport/Repository.swift` three levels up).
    package static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}

import ArgumentParser
import Foundation

/// A step of `runner dev` that failed: its own error and what to do, printed without the command's usage (the
/// arguments were fine; the usage would only hide the cause).
struct DevStepError: Error, CustomStringConvertible {
    let step: String
    let error: String
    let remedy: String

    var description: String { "runner dev: \(step) failed: \(error)\n  What to do: \(remedy)\n" }

    /// Runs `body` as the step named `step`; an error of its own becomes a `DevStepError` with `remedy`.
    static func step<T>(_ step: String, remedy: String, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as DevStepError {
            throw error
        } catch let error as ValidationError {
            throw DevStepError(step: step, error: error.message, remedy: remedy)
        } catch {
            throw DevStepError(step: step, error: String(describing: error), remedy: remedy)
        }
    }

    /// Prints the failed step and ends the process with status 1.
    static func exit(_ error: DevStepError) -> Never {
        FileHandle.standardError.write(Data(error.description.utf8))
        Runner.exit(withError: ExitCode.failure)
    }
}

/// Where `runner dev` works: the repository root. The working directory when it is one, else the checkout the
/// runner was built in (`…/.build/<triple>/debug/runner` → `…`), so that `runner dev` works from any directory.
enum DevRepository {
    static func isRoot(_ path: String) -> Bool {
        FileManager.default.fileExists(atPath: path + "/scripts/pg.sh")
            && FileManager.default.fileExists(atPath: path + "/infra/migrations")
    }

    /// Changes to the repository root; `false` when neither the working directory nor the runner's checkout is one.
    static func enter(runnerPath: String = CommandLine.arguments[0]) -> Bool {
        let here = FileManager.default.currentDirectoryPath
        if isRoot(here) { return true }
        var directory = URL(fileURLWithPath: runnerPath).resolvingSymlinksInPath().deletingLastPathComponent()
        while directory.path != "/" {
            if directory.lastPathComponent == ".build" {
                let root = directory.deletingLastPathComponent().path
                return isRoot(root) && FileManager.default.changeCurrentDirectoryPath(root)
            }
            directory = directory.deletingLastPathComponent()
        }
        return false
    }
}

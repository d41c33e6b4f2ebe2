// webauthn-fuzz: every fuzz target of the engine in one libFuzzer binary.
//
//   FUZZ_TARGET=<name> webauthn-fuzz [libFuzzer flags] [corpus dirs | input files]
//   webauthn-fuzz --list                  the targets and their inputs
//   webauthn-fuzz --write-seeds [DIR]     (re)write the seed corpora (default Fuzz/Corpus)
//
// SwiftPM links this file's top-level code as the program's main (it renames
// it webauthn_fuzz_main), so libFuzzer's own main is not used: the driver is
// started with LLVMFuzzerRunDriver. See Docs/Fuzzing.md.
import CLibFuzzer
import Foundation

/// The target chosen by FUZZ_TARGET, read by the callback.
nonisolated(unsafe) var selectedTarget: FuzzTarget?

/// libFuzzer's callback (also exported under its usual name, for tools that look for it).
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    selectedTarget!.run(UnsafeBufferPointer(start: size == 0 ? nil : data, count: size))
    return 0
}

let arguments = CommandLine.arguments
if arguments.count >= 2, arguments[1] == "--list" {
    for target in allTargets { print("\(target.name)\t\(target.input)") }
    exit(0)
}
if arguments.count >= 2, arguments[1] == "--write-seeds" {
    let folder = arguments.count >= 3 ? URL(fileURLWithPath: arguments[2]) : Fixtures.repository.appendingPathComponent("Fuzz/Corpus")
    do { try Seeds.write(to: folder) } catch {
        FileHandle.standardError.write(Data("writing seeds failed: \(error)\n".utf8))
        exit(1)
    }
    exit(0)
}
let name = ProcessInfo.processInfo.environment["FUZZ_TARGET"] ?? ""
guard let target = allTargets.first(where: { $0.name == name }) else {
    FileHandle.standardError.write(
        Data(
            """
            usage: FUZZ_TARGET=<target> webauthn-fuzz [libFuzzer flags] [corpus dirs | inputs]
                   webauthn-fuzz --list | --write-seeds [DIR]
            \(name.isEmpty ? "FUZZ_TARGET is not set" : "no target \"\(name)\""); targets: \(allTargets.map(\.name).joined(separator: " "))

            """.utf8))
    exit(2)
}
selectedTarget = target
Fixtures.warmUp()

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzOneInput(data, size) })

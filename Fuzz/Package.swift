// swift-tools-version:6.0
// libFuzzer targets for every parser that client bytes reach, and for whole
// ceremonies (see Docs/Fuzzing.md). One executable, one target per run, chosen
// with FUZZ_TARGET. Build it with `make fuzz-build` (address sanitizer and
// fuzzer instrumentation, debug, so `@testable import` reaches the internals).
import PackageDescription

let package = Package(
    name: "webauthn-fuzz",
    dependencies: [
        .package(name: "swift-webauthn-engine", path: ".."),
    ],
    targets: [
        // Declares libFuzzer's LLVMFuzzerRunDriver (compiler-rt, linked by -sanitize=fuzzer).
        .systemLibrary(name: "CLibFuzzer"),
        .executableTarget(
            name: "webauthn-fuzz",
            dependencies: [
                "CLibFuzzer",
                .product(name: "WebAuthnCore", package: "swift-webauthn-engine"),
                .product(name: "WebAuthnTesting", package: "swift-webauthn-engine"),
                .product(name: "WebAuthnMetadata", package: "swift-webauthn-engine"),
            ]
        ),
    ]
)

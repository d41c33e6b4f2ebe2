// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "swift-webauthn-engine",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "WebAuthnCore", targets: ["WebAuthnCore"]),
        .library(name: "WebAuthnTesting", targets: ["WebAuthnTesting"]),
        .executable(name: "webauthn", targets: ["webauthn"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    ],
    targets: [
        // The only two C libraries. Everything that touches them lives in
        // WebAuthnCore/Crypto and WebAuthnCore/CBOR (see Docs/CInterop.md).
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CCBOR",
            pkgConfig: "libcbor",
            providers: [.apt(["libcbor-dev"])]
        ),
        .target(
            name: "WebAuthnCore",
            dependencies: ["COpenSSL", "CCBOR"],
            swiftSettings: [.unsafeFlags(["-Ounchecked"], .when(configuration: .release))]
        ),
        // A software authenticator for tests of relying parties.
        .target(
            name: "WebAuthnTesting",
            dependencies: ["WebAuthnCore"]
        ),
        .executableTarget(
            name: "webauthn",
            dependencies: [
                "WebAuthnCore",
                "WebAuthnTesting",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "WebAuthnCoreTests",
            dependencies: ["WebAuthnCore", "WebAuthnTesting"]
        ),
        .testTarget(
            name: "WebAuthnCLITests",
            dependencies: ["WebAuthnCore", .target(name: "webauthn")]
        ),
    ]
)

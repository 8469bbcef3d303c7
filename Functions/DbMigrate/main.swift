import CaregiverPush
import FoundationEssentials
import Migrations

// A CloudFormation custom resource: reads CloudFormation's request (on stdin, or from the Runtime API on Lambda),
// applies the migrations on Create and Update, and PUTs the outcome to the request's ResponseURL.
CaregiverFunction.main(name: "db-migrate") { configuration, logger in
    let environment = ProcessInfo.processInfo.environment
    return MigrationsCustomResource(
        configuration: configuration, logger: logger,
        migrationsDirectory: MigrationsCustomResource.migrationsDirectory(environment: environment),
        region: environment["AWS_REGION"])
}

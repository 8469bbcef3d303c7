import Testing

@testable import CaregiverPush

/// db-migrate answers only CloudFormation's response bucket of its own region (docs/deploy.md#db-migrate): S3 bucket
/// names are first come, first served, so a `cloudformation-custom-resource-response-*` bucket of another region may
/// be anyone's.
@Suite("db-migrate's ResponseURL: CloudFormation's bucket in the function's own region")
struct ResponseURLTests {
    @Test("every form CloudFormation hands out in the function's region is accepted")
    func ownRegion() {
        for (url, region) in [
            (
                "https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/a?X-Amz-Signature=x",
                "us-east-1"
            ),
            (
                "https://cloudformation-custom-resource-response-apnortheast1.s3.ap-northeast-1.amazonaws.com/a",
                "ap-northeast-1"
            ),
            ("https://cloudformation-custom-resource-response-euwest1.s3-eu-west-1.amazonaws.com/a", "eu-west-1"),
            ("https://cloudformation-custom-resource-response-cnnorth1.s3.cn-north-1.amazonaws.com.cn/a", "cn-north-1"),
        ] {
            #expect(MigrationsCustomResource.isCloudFormationResponseURL(url, region: region), "\(url)")
        }
    }

    @Test("another region's bucket or host, or no region known, is refused")
    func otherRegions() {
        let own = "https://cloudformation-custom-resource-response-apnortheast1.s3.amazonaws.com/a"
        #expect(!MigrationsCustomResource.isCloudFormationResponseURL(own, region: nil))
        #expect(!MigrationsCustomResource.isCloudFormationResponseURL(own, region: "us-east-1"))
        for url in [
            "https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/a",
            "https://cloudformation-custom-resource-response-apnortheast1.s3.us-east-1.amazonaws.com/a",
            "https://cloudformation-custom-resource-response-apnortheast1.s3-ap-northeast-2.amazonaws.com/a",
            "https://cloudformation-custom-resource-response-apnortheast1x.s3.amazonaws.com/a",
            "https://cloudformation-custom-resource-response-.s3.amazonaws.com/a",
        ] {
            #expect(!MigrationsCustomResource.isCloudFormationResponseURL(url, region: "ap-northeast-1"), "\(url)")
        }
    }
}

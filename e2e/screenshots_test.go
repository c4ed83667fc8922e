package e2e

import "flag"

// updateScreenshots makes the report tests in this package (fence chaos --report, fence bench
// --report) write their screenshots under docs/img, for the README, besides checking the page.
var updateScreenshots = flag.Bool("update-screenshots", false, "write the report screenshots under docs/img (for the README)")

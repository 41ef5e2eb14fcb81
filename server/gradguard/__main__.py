from gradguard.cli import main

raise SystemExit(main())

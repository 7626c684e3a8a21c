from trainsleuth.cli import main

raise SystemExit(main())
